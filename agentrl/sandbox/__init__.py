"""agentrl.sandbox"""
