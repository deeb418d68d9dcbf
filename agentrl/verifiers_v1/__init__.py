"""verifiers 0.4 (`verifiers.v1`) environments: their tasksets, harnesses and rewards, unchanged, trained through
agentrl's gateway (`agent.name=verifiers_v1`, `agentrl.gateway.verifiers_v1`). verifiers 0.4 pins an older `openai`
than agentrl, so it runs in an interpreter of its own (`install`), as a long-lived process (`episode_server`)."""
