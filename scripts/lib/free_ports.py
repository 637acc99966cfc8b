"""free_ports.py N: N distinct free TCP ports on 127.0.0.1, one line, held open together while picked.

Picked at random below the kernel's ephemeral range (ip_local_port_range), not by binding port 0: a port from that
range can be taken by any outgoing connection (a test's, a client's) between the pick and the daemon's bind, which
happens tens of seconds later for a controller-manager that starts once its API server is ready.
"""
import random
import socket
import sys

try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        top = int(f.read().split()[0])
except (OSError, ValueError, IndexError):
    top = 32768
low = 10000 if top > 12000 else 1024
socks = []
while len(socks) < int(sys.argv[1]):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(low, top)))
    except OSError:
        s.close()
        continue
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
