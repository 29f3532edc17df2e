"""distmgr's store against torch's TCPStore, both ways (tests/store_torch.sh).

  store_torch.py TOOL DIALECT   (TOOL: the built tests/store_tool)

1. torch hosts the store; distmgr's client runs every request (store_tool
   check) and leaves "/from_c", which torch's client then reads.
2. distmgr hosts the store (store_tool serve); torch's client runs its
   requests against it, with a WAIT that times out, and nothing is dropped.
torch's client prefixes every key with "/": torch's "k" is distmgr's "/k"."""
import subprocess
import sys
from datetime import timedelta

import torch.distributed as dist

tool, dialect = sys.argv[1], sys.argv[2]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        print("FAIL:", what)
        failures += 1


# 1. torch's server, distmgr's client.
server = dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=10), wait_for_workers=False)
r = subprocess.run([tool, "check", "127.0.0.1", str(server.port), dialect], capture_output=True, text=True, timeout=60)
print(r.stdout + r.stderr, end="")
check(r.returncode == 0, "distmgr's client against torch's server")
check(server.get("from_c") == b"hello", "torch reads the key distmgr's client set")
check(server.get("n") == b"-2", "ADD's ASCII decimal, as torch reads it")

# 2. distmgr's server, torch's client.
p = subprocess.Popen([tool, "serve", dialect], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
port = int(p.stdout.readline().split()[1])
c = dist.TCPStore("127.0.0.1", port, 1, False, timedelta(seconds=10), wait_for_workers=False)
c.set("k", "v1")
check(c.get("k") == b"v1", "SET then GET")
check(c.add("n", 7) == 7 and c.add("n", -9) == -2, "ADD")
check(c.get("n") == b"-2", "ADD's value as a string")
check(c.compare_set("k", "v1", "v2") == b"v2", "COMPARE_SET, equal")
check(c.compare_set("k", "zz", "v3") == b"v2", "COMPARE_SET, different")
check(c.num_keys() >= 2, "GETNUMKEYS")
check(c.delete_key("k") is True and c.delete_key("k") is False, "DELETE_KEY")
try:
    c.wait(["never"], timedelta(milliseconds=300))
    check(False, "a WAIT for a missing key times out")
except RuntimeError as e:
    check("imeout" in str(e) or "timed out" in str(e), "WAIT's timeout: " + str(e)[:80])
d = dist.TCPStore("127.0.0.1", port, 1, False, timedelta(seconds=10), wait_for_workers=False)
d.set("other", "x")
check(d.get("other") == b"x", "a second torch client")
p.stdin.close()
rest = p.stdout.read()
p.wait(timeout=30)
print("server:", rest.strip())
check("dropped 0" in rest, "distmgr's server dropped no torch client")
print("store_torch: %d failure(s)" % failures)
sys.exit(1 if failures else 0)
