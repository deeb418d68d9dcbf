#!/bin/bash
# Copied to /tests after the agent finished; runs in /app. Writes 1 or 0 to /logs/verifier/reward.txt.
if python3 /tests/check_average.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
