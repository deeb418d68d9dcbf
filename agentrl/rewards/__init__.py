"""agentrl.rewards"""
