"""agentrl.loops"""
