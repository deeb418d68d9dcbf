"""A stand-in for `agentrl/harbor/verify_server.py` that speaks its protocol without Harbor (fault-injection
tests of the client only). `FAKE_HARBOR_MODE`: `serve` asks agentrl to run the verification's command on its
sandbox, download the folder `logs` and answers the rewards the file `logs/reward.txt` names; `die` exits at the
first verification with a message on stderr; `hang` asks for a command that sleeps and waits for a cancel."""

import json
import os
import sys
import tempfile
from pathlib import Path


def ask(call, ident, op, **args):
    print(json.dumps({"call": call, "id": ident, "op": op, **args}), flush=True)
    return json.loads(sys.stdin.readline())


def main():
    mode = os.environ.get("FAKE_HARBOR_MODE", "serve")
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("op") == "cancel":
            print(json.dumps({"id": message["id"], "error": "cancelled"}), flush=True)
            continue
        ident = message["id"]
        if mode == "die":
            print("harbor: broken install", file=sys.stderr, flush=True)
            return 1
        if mode == "hang":
            print(json.dumps({"call": 1, "id": ident, "op": "exec", "command": "sleep 30; touch late"}), flush=True)
            continue
        ran = ask(1, ident, "exec", command="mkdir -p logs && echo 0.5 > logs/reward.txt && echo ran", cwd=None)
        with tempfile.TemporaryDirectory() as here:
            ask(2, ident, "download_dir", source="logs", target=here)
            reward = float((Path(here) / "reward.txt").read_text())
        print(
            json.dumps({"id": ident, "rewards": {"reward": reward, "said": len(ran["result"]["stdout"])}}), flush=True
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
