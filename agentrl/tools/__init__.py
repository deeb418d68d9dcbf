"""agentrl.tools"""
