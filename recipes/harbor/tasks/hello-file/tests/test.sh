#!/bin/bash
# Copied to /tests after the agent finished; runs in /app. Writes 1 or 0 to /logs/verifier/reward.txt.
expected="Hello, Harbor!"
if [ ! -f /app/greeting.txt ]; then
  echo "FAIL: /app/greeting.txt does not exist"
  echo 0 > /logs/verifier/reward.txt
elif [ "$(cat /app/greeting.txt)" = "$expected" ]; then
  echo "PASS: /app/greeting.txt holds '$expected'"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/greeting.txt holds '$(head -c 200 /app/greeting.txt)', expected '$expected'"
  echo 0 > /logs/verifier/reward.txt
fi
