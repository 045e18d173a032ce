"""Where expert parallelism across machines pays off, from measured rates: per MoE layer and
decode step, a machine holding every expert (a replica) against one of N machines holding 1/N of
them, each running its own batch of B sequences (data-parallel attention: attention, dense and
shared-expert work are the same in both and left out).

  replica:  t = E (1 - (1 - k/E)^B) S / M                            (distinct experts read)
  EP of N:  t = (E/N) (1 - (1 - k/E)^(B N)) S / M                     (its slice, all N batches)
              + 2 B k d w (N - 1)/N / W + 3 a                         (dispatch + combine, counts)

E routed experts of S bytes, k per token, hidden d, w bytes per value on the wire (4: f32 as the
engine computes them, 2: bf16), M the rate a machine streams expert weights (measured), W the
network bandwidth per machine, a the latency of one all-to-all. Prints, per model and B, the
step-time ratio replica / EP (> 1: EP is faster per machine) for N = 2 .. 16, and the bytes.

  .venv/bin/python bench/ep/ep_model.py --mem-gbs 20 --net-gbs 12.5,50 --latency-us 20 --wire-bytes 4
"""
import argparse

MODELS = {
    # name: (routed experts, per token, hidden, expert bytes, MoE layers, all expert bytes note)
    "DeepSeek-V3 (fp8 experts)": (256, 8, 7168, 3 * 7168 * 2048 * (1 + 1 / 16384), 58),
    "DeepSeek-V4-Flash (fp4 experts)": (256, 6, 4096, 3 * 4096 * 2048 * (0.5 + 1 / 32), 43),
}


def step_ms(E, k, d, S, B, N, mem, net, lat, w):
    p = k / E
    replica = E * (1 - (1 - p) ** B) * S / mem
    ep_read = (E / N) * (1 - (1 - p) ** (B * N)) * S / mem
    ep_comm = 2 * B * k * d * w * (N - 1) / N / net + 3 * lat
    return 1e3 * replica, 1e3 * ep_read, 1e3 * ep_comm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mem-gbs", type=float, required=True, help="measured expert-weight streaming rate, GB/s")
    ap.add_argument("--net-gbs", default="12.5,50", help="network bandwidth per machine, GB/s (100 and 400 Gb/s)")
    ap.add_argument("--latency-us", type=float, default=20)
    ap.add_argument("--wire-bytes", type=int, default=4)
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--ranks", default="2,4,8,16")
    a = ap.parse_args()
    mem = a.mem_gbs * 1e9
    ranks = [int(n) for n in a.ranks.split(",")]
    for net_gbs in map(float, a.net_gbs.split(",")):
        for name, (E, k, d, S, L) in MODELS.items():
            print(f"\n{name}: {E} experts of {S / 1e6:.1f} MB ({E * S * L / 1e9:.0f} GB in {L} MoE layers), top-{k}, "
                  f"hidden {d}; M = {a.mem_gbs:g} GB/s, W = {net_gbs:g} GB/s, a = {a.latency_us:g} us, "
                  f"{a.wire_bytes} B per value on the wire\n")
            print("| batch per machine | replica ms per MoE layer | " +
                  " | ".join(f"N={n}: EP ms (read + wire), speed-up" for n in ranks) + " | wire KB per layer and machine, N=" +
                  str(ranks[-1]) + " |")
            print("|---" * (3 + len(ranks)) + "|")
            for B in map(int, a.batches.split(",")):
                cells = []
                for N in ranks:
                    rep, read, comm = step_ms(E, k, d, S, B, N, mem, net_gbs * 1e9, a.latency_us * 1e-6, a.wire_bytes)
                    cells.append(f"{read + comm:.2f} ({read:.2f} + {comm:.2f}), {rep / (read + comm):.1f}x")
                N = ranks[-1]
                wire = 2 * B * k * d * a.wire_bytes * (N - 1) / N / 1e3
                rep = step_ms(E, k, d, S, B, 1, mem, net_gbs * 1e9, 0, a.wire_bytes)[0]
                print(f"| {B} | {rep:.2f} | " + " | ".join(cells) + f" | {wire:.0f} |")


if __name__ == "__main__":
    main()
