"""`deepinfer serve --expert-parallel N` under mpirun for tests: every rank's port and pid from
its log line, readiness through each rank's /health, and a teardown that ends the whole job
(SIGTERM to mpirun, then SIGKILL to its process group) within bounded time."""
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

MPIRUN = shutil.which("mpirun")
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def health(base, timeout=5):
    try:
        with urllib.request.urlopen(base + "/health", timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None


class EpServer:
    def __init__(self, binary, model, n_ranks, *args, mpirun_args=(), timeout=120):
        self.n = n_ranks
        cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", *mpirun_args, "-np", str(n_ranks), binary, "serve",
               "--model", str(model), "--port", "0", "--served-model-name", "tiny", "--kv-cache-memory",
               str(256 << 20), "--expert-parallel", str(n_ranks), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV,
                                     start_new_session=True)
        self.log = []
        self.ranks = {}  # rank -> (pid, base url)
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()
        deadline = time.time() + timeout
        while len(self.ranks) < n_ranks or any(health(b) != 200 for _, b in self.ranks.values()):
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError("EP server did not start: " + "".join(self.log))
            time.sleep(0.1)

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"rank (\d+) of \d+ \(pid (\d+)\) serves (http://[\d.]+:\d+)", line)
            if m:
                self.ranks[int(m.group(1))] = (int(m.group(2)), m.group(3))

    def base(self, rank):
        return self.ranks[rank][1]

    def pid(self, rank):
        return self.ranks[rank][0]

    def stop(self, timeout=30):
        """Ends the job (its log is then complete); returns mpirun's exit code (None if it had to be killed)."""
        code = self.proc.poll()
        if code is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.drain.join(timeout=10)
        return code
