#!/bin/bash
# Copied to /tests after the agent finished; runs in /app. Writes /logs/verifier/reward.json with the reward and
# its components: the file exists, it holds a whole number, and that number is the word count.
expected=$(python3 -c 'print(len(open("/app/text.txt").read().split()))')
exists=0; number=0; correct=0
if [ -f /app/count.txt ]; then
  exists=1
  got=$(tr -d '[:space:]' < /app/count.txt)
  if [[ "$got" =~ ^[0-9]+$ ]]; then
    number=1
    [ "$got" -eq "$expected" ] && correct=1
  fi
  echo "/app/count.txt holds '${got:0:80}', the text has $expected words"
else
  echo "/app/count.txt does not exist"
fi
printf '{"reward": %d, "file_exists": %d, "is_number": %d}\n' "$correct" "$exists" "$number" > /logs/verifier/reward.json
cat /logs/verifier/reward.json
