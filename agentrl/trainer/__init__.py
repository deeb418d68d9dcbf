"""agentrl.trainer"""
