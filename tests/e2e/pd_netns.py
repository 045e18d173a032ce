"""Separate hosts on one machine for the prefill/decode tests: one network namespace per worker,
each joined by a veth pair to a bridge in the root namespace (where the router and the test run),
on a private /24 that exists only on these veths. Workers bind their HTTP on their namespace's
address and UCX is confined to TCP over that veth (UCX_TLS=tcp, UCX_NET_DEVICES), so the KV and
the control messages cross the veth and an impairment on it (`tc netem`, or nftables and `tc tbf`) delays and drops them;
a rate limit (`tc tbf`) slows a transfer enough to act inside it, and a blocked port holds back
one side's control messages.
Everything made here is removed by `Hosts.close()`, also after a failure."""
import itertools
import json
import os
import random
import re
import shutil
import subprocess

DEV = "pdnet0"
_made = itertools.count()  # Hosts made by this process: part of their names  # the worker's end of its veth, inside its namespace


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def unavailable():
    """Why namespaces cannot be made here, or None."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2's ip and tc"
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    probe = f"dipdprobe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return "ip netns add failed: " + r.stderr.strip()
    ip("netns", "del", probe, check=False)
    return None


class Hosts:
    """A bridge and a subnet 10.231.N.0/24 with a unique N and names unique to this run; host i
    is namespace `name(i)` with address `addr(i)`."""

    def __init__(self, tmp_dir):
        self.tag = f"{os.getpid() % 100000:05d}{next(_made)}"
        self.bridge = f"dibr{self.tag}"
        taken = ip("-4", "addr").stdout
        self.net = next(n for n in random.sample(range(1, 255), 254) if f"10.231.{n}." not in taken)
        self.tmp_dir = tmp_dir
        self.spaces = []
        self.links = []
        ip("link", "add", self.bridge, "type", "bridge")
        self.links.append(self.bridge)
        ip("addr", "add", f"10.231.{self.net}.1/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def name(self, i):
        return f"dipd{self.tag}h{i}"

    def addr(self, i):
        return f"10.231.{self.net}.{10 + i}"

    def add(self, i):
        """Namespace i, its veth (up, addressed) and loopback."""
        ns, outer = self.name(i), f"dv{self.tag}h{i}"
        ip("netns", "add", ns)
        self.spaces.append(ns)
        ip("link", "add", outer, "type", "veth", "peer", "name", DEV, "netns", ns)
        self.links.append(outer)
        ip("link", "set", outer, "master", self.bridge)
        ip("link", "set", outer, "up")
        ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", DEV)
        ip("-n", ns, "link", "set", DEV, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        return ns

    def launcher(self, i, binary, env=()):
        """A script that runs `binary` with its arguments inside namespace i, UCX on TCP over the veth
        only, plus the "NAME=VALUE" settings in `env` (exec all the way down, so the process id is
        the server's)."""
        path = self.tmp_dir / f"in-{self.name(i)}.sh"
        path.write_text(f"#!/bin/sh\nexec ip netns exec {self.name(i)} env UCX_TLS=tcp UCX_NET_DEVICES={DEV} "
                        f"{' '.join(env)} {binary} \"$@\"\n")
        path.chmod(0o755)
        return str(path)

    def rx_bytes(self, i):
        """Bytes host i has received on its veth."""
        out = ip("-n", self.name(i), "-s", "-j", "link", "show", DEV).stdout
        return json.loads(out)[0]["stats64"]["rx"]["bytes"]

    def tcp_received(self, i, skip_ports):
        """{peer address: bytes} host i has received on its open TCP connections, except those to or
        from a port in `skip_ports` (the workers' HTTP ports): the KV UCX reads have moved so far."""
        out = subprocess.run(["ip", "netns", "exec", self.name(i), "ss", "-tinH", "state", "established"],
                             check=True, capture_output=True, text=True, timeout=30).stdout
        skip = {str(p) for p in skip_ports}
        totals, peer = {}, None
        for line in out.splitlines():
            if not line[:1].isspace():  # a connection: Recv-Q Send-Q local:port peer:port
                local, remote = line.split()[2:4]
                address, port = remote.rsplit(":", 1)
                peer = None if skip & {port, local.rsplit(":", 1)[1]} else address
            elif peer is not None:
                m = re.search(r"bytes_received:(\d+)", line)
                totals[peer] = totals.get(peer, 0) + (int(m.group(1)) if m else 0)
        return totals

    def impair(self, i):
        """Makes host i's link slow and lossy; returns what was applied. `tc netem delay 50ms loss 5%`
        where the kernel has netem; else 5% of packets dropped each way by nftables and the link
        limited by `tc tbf` to 2 Mbit/s with up to 50 ms of queueing. Raises where neither works."""
        run = ["ip", "netns", "exec", self.name(i)]
        r = subprocess.run([*run, "tc", "qdisc", "replace", "dev", DEV, "root", "netem", "delay", "50ms", "loss", "5%"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return "netem delay 50ms loss 5%"
        if shutil.which("nft") is None:
            raise RuntimeError("tc netem failed (" + r.stderr.strip() + ") and nftables' nft is missing")
        rules = (f"table inet dipdloss {{\n"
                 f" chain out {{ type filter hook output priority 0; policy accept; "
                 f"oifname \"{DEV}\" numgen random mod 100 < 5 drop; }}\n"
                 f" chain in {{ type filter hook input priority 0; policy accept; "
                 f"iifname \"{DEV}\" numgen random mod 100 < 5 drop; }}\n}}\n")
        subprocess.run([*run, "nft", "-f", "-"], input=rules, check=True, capture_output=True, text=True, timeout=30)
        subprocess.run([*run, "tc", "qdisc", "replace", "dev", DEV, "root", "tbf", "rate", "2mbit", "burst", "16kb",
                        "latency", "50ms"], check=True, capture_output=True, timeout=30)
        return "nftables loss 5% each way, tbf 2mbit latency 50ms (the kernel lacks netem: " + r.stderr.strip() + ")"

    def limit_rate(self, i, rate):
        """Limits what host i sends (`tc tbf`, e.g. rate "1mbit"): a decode worker's UCX read of
        this host's blocks then takes bytes / rate, long enough to act inside it."""
        subprocess.run(["ip", "netns", "exec", self.name(i), "tc", "qdisc", "replace", "dev", DEV, "root", "tbf", "rate",
                        rate, "burst", "16kb", "latency", "200ms"], check=True, capture_output=True, timeout=30)

    def block_port(self, i, port, sources):
        """Host i drops TCP packets to its `port` from the addresses `sources` (new connections
        included); `clear_impairment` lifts it."""
        saddrs = ", ".join(sources)
        rules = (f"table inet dipdhold {{\n chain in {{ type filter hook input priority 0; policy accept; "
                 f"ip saddr {{ {saddrs} }} tcp dport {port} drop; }}\n}}\n")
        subprocess.run(["ip", "netns", "exec", self.name(i), "nft", "-f", "-"], input=rules, check=True,
                       capture_output=True, text=True, timeout=30)

    def clear_impairment(self, i):
        run = ["ip", "netns", "exec", self.name(i)]
        subprocess.run([*run, "tc", "qdisc", "del", "dev", DEV, "root"], capture_output=True, timeout=30)
        subprocess.run([*run, "nft", "delete", "table", "inet", "dipdloss"], capture_output=True, timeout=30)
        subprocess.run([*run, "nft", "delete", "table", "inet", "dipdhold"], capture_output=True, timeout=30)

    def close(self):
        for link in reversed(self.links):
            ip("link", "del", link, check=False)
        for ns in self.spaces:
            ip("netns", "del", ns, check=False)
