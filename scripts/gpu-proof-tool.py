#!/usr/bin/env python3
"""Helpers of scripts/gpu-proof.sh (stdlib only; the GPU machine has python3).

  inventory OWNER_JSON DIR VARIANT [good|bad]   a one-rank inventory (unsealed)
  profile OWNER_JSON PATH                       the deployment profile
  get FILE EXPR                                 a value from a JSON file (d)
  record SUMMARY NAME STATUS DETAIL SECONDS     append a step to summary.json
  environment OUT OWNER_ENV KEY=VALUE...        the environment document
  content SIZE OFFSET SEED [bad]                the content member (JSON)

The owner (scripts/gpu-proof-owner.c) fills byte i of an allocation with
((i * 2654435761) >> 13 ^ seed) & 0xff; content() samples it by the rule of
the descriptor's content member (16 pages of 4096 bytes, the first and the
last included; one range when size_bytes <= 4096).
"""
import hashlib, json, os, sys, time

def pattern(start, n, seed):
    return bytes((((i * 2654435761) >> 13) ^ seed) & 0xFF for i in range(start, start + n))

def content(size, offset, seed, corrupt=False):
    """docs/format.md content member: 16 pages of 4096 (or one range)."""
    P, N = 4096, 16
    if size <= P:
        ranges = [(offset, size)]
        N = 1
    else:
        ranges = [(offset + (i * (size - P)) // (N - 1), P) for i in range(N)]
    h = hashlib.sha256()
    for start, n in ranges:
        h.update(pattern(start, n, seed))
    d = h.hexdigest()
    if corrupt:
        d = ("0" if d[0] != "0" else "1") + d[1:]
    return {"page_bytes": P, "pages": N, "sha256": d}

def start_ticks(pid):
    stat = open(f"/proc/{pid}/stat").read()
    return int(stat[stat.rindex(")") + 2:].split()[19])

HARDWARE_ONLY = ["environment", "trial-read-only", "vmm-size-too-large", "ipc-beyond-range",
                 "ipc-corrupt-handle", "plain-memfd", "same-ipc-handle-twice",
                 "one-allocation-two-fds", "control-pair", "visible-devices-empty", "toolkit-stub", "hold",
                 "read-only-refuses-writes"]

GEOMETRY = {"num_layers": 1, "kv_heads_per_rank": 1, "head_size": 1, "block_size": 1,
            "num_blocks": 1, "dtype": "int8", "use_mla": False}
MODEL = {"name": "gpu-proof/model", "revision": "1", "quantization": None}
INCARNATION = "6b0c2a4e-2f1d-4c3b-9a8e-7d6c5b4a3f21"

def allocations(o, variant, with_content):
    S = o["size"]
    ipc, vmm, fab = o["ipc"], o["vmm"], o.get("fabric")
    def a(i, kind, handle, size, off, seed):
        x = {"id": i, "size_bytes": size, "handle": dict(kind=kind, **handle)}
        if off:
            x["offset_bytes"] = off
        if with_content:
            x["content"] = content(size, off, seed, corrupt=(with_content == "bad"))
        return x
    I = lambda i, size=S, off=0, hexs=ipc["hex"]: a(i, "cuda_ipc", {"hex": hexs}, size, off, ipc["seed"])
    V = lambda i, size=vmm["size"], off=0, fd=vmm["fd"]: a(i, "posix_fd", {"fd": fd}, size, off, vmm["seed"])
    if variant == "base":
        out = [I("kv-ipc")] + ([] if os.environ.get("GPU_PROOF_NO_POSIX_FD") else [V("kv-vmm")])
        if fab:
            out.append(a("kv-fabric", "fabric", {"hex": fab["hex"]}, fab["size"], 0, fab["seed"]))
        return out
    if variant == "vmm-offset":
        return [V("kv-vmm", size=vmm["size"] // 2, off=vmm["size"] // 4 + 512)]
    if variant == "vmm-size":
        return [V("kv-vmm", size=vmm["size"] + 2 * 1024 * 1024)]
    if variant == "ipc-range":
        return [I("kv-ipc", size=8192, off=S - 4096)]
    if variant == "ipc-corrupt":
        b = bytearray.fromhex(ipc["hex"])
        for k in list(range(0, 8)) + list(range(48, 64)):
            b[k] ^= 0x5A
        return [I("kv-ipc", hexs=b.hex())]
    if variant == "fd-closed":
        return [V("kv-vmm", fd=o["closed_fd"])]
    if variant == "plain-memfd":
        return [V("kv-vmm", fd=o["plain_memfd"])]
    if variant == "ipc-twice":
        return [I("kv-lo", size=S // 2), I("kv-hi", size=S // 2, off=S // 2)]
    if variant == "two-fds":
        return [V("kv-a"), V("kv-b", fd=vmm["fd2"])]
    if variant == "control":
        # Two distinct allocations (the posix_fd one and the hold's), both
        # at offset 0: kvcr imports them together; one MEMORY_BLOCK_ID for
        # both would be read as one memory twice.
        h = o["hold"]
        return [V("kv-a"), a("kv-b", "posix_fd", {"fd": h["fd"]}, h["size"], 0, h["seed"])]
    if variant == "hold":
        h = o["hold"]
        out = [] if os.environ.get("GPU_PROOF_NO_POSIX_FD") else [
            a("kv-hold", "posix_fd", {"fd": h["fd"]}, h["size"], 0, h["seed"])]
        if fab:
            out.append(a("kv-fabric", "fabric", {"hex": fab["hex"]}, fab["size"], 0, fab["seed"]))
        return out
    raise SystemExit(f"unknown variant {variant}")

def descriptor(o, variant, with_content):
    pid = o["pid"]
    return {
        "schema": "kvcr.retained-rank/v1", "engine_id": "gpu-proof", "incarnation": INCARNATION,
        "epoch": 1, "rank": 0, "world_size": 1, "tp": 1, "pp": 1,
        "node": {"hostname": open("/proc/sys/kernel/hostname").read().strip(),
                 "boot_id": open("/proc/sys/kernel/random/boot_id").read().strip()},
        "gpu_uuid": o["gpu_uuid"], "model": MODEL, "geometry": GEOMETRY,
        "owner": {"pid": pid, "start_ticks": start_ticks(pid)},
        "writer": {"pid": pid, "start_ticks": start_ticks(pid), "quiesced": True},
        "allocations": allocations(o, variant, with_content),
        "created_unix_ms": int(time.time() * 1000),
    }

def write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)

def main():
    cmd = sys.argv[1]
    if cmd == "inventory":  # OWNER_JSON DIR VARIANT [good|bad]
        o = json.load(open(sys.argv[2]))
        d = sys.argv[3]
        os.makedirs(d, mode=0o700, exist_ok=True)
        os.chmod(d, 0o700)
        c = sys.argv[5] if len(sys.argv) > 5 else None
        write_private(os.path.join(d, "rank-0.json"),
                      json.dumps(descriptor(o, sys.argv[4], c), indent=1) + "\n")
    elif cmd == "profile":  # OWNER_JSON PATH
        o = json.load(open(sys.argv[2]))
        p = {"schema": "kvcr.profile/v1", "engine_id": "gpu-proof", "world_size": 1, "tp": 1,
             "pp": 1, "model": MODEL, "geometry": GEOMETRY, "gpus": [o["gpu_uuid"]],
             "incarnation": INCARNATION, "min_epoch": 1}
        write_private(sys.argv[3], json.dumps(p, indent=1) + "\n")
    elif cmd == "get":  # FILE EXPR: eval over d, printed; exit 1 when unreadable
        try:
            d = json.load(open(sys.argv[2]))
        except (OSError, ValueError) as e:
            print(f"<unreadable: {e}>")
            sys.exit(1)
        v = eval(sys.argv[3], {"d": d})
        print(json.dumps(v) if isinstance(v, (dict, list)) else v)
    elif cmd == "record":  # SUMMARY NAME STATUS DETAIL SECONDS
        path, name, status, detail, secs = sys.argv[2:7]
        try:
            s = json.load(open(path))
        except (OSError, ValueError):
            s = {"schema": "kvcr.gpu-proof/v1", "finished": False, "ok": None, "exit": None,
                 "timed_out": False, "driver": "unknown", "environment": {}, "steps": []}
        s["steps"].append({"name": name, "status": status, "detail": detail, "seconds": float(secs)})
        s["elapsed_s"] = int(time.time()) - int(os.environ.get("GPU_PROOF_T0", time.time()))
        envf = os.environ.get("GPU_PROOF_ENVFILE")
        if envf and os.path.exists(envf):
            s["environment"] = json.load(open(envf))
            s["driver"] = s["environment"].get("driver", "unknown")
        if s["driver"] == "fake":
            # What a pass against the fake cannot settle (docs/import.md).
            s["hardware_only"] = HARDWARE_ONLY
            s["note"] = ("driver is the project's fake: these steps passed only as the fake "
                         "models them; their hardware question stays open: "
                         + ", ".join(HARDWARE_ONLY))
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(s, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    elif cmd == "environment":  # OUT_JSON OWNER_ENV_JSON then KEY=VALUE...
        env = {}
        try:
            env["owner_view"] = json.load(open(sys.argv[3]))
        except (OSError, ValueError) as e:
            env["owner_view"] = {"error": str(e)}
        for kv in sys.argv[4:]:
            k, _, v = kv.partition("=")
            env[k] = v
        lib = env["owner_view"].get("libcuda_realpath") or env["owner_view"].get("libcuda") or ""
        names = [d.get("name", "") for d in env["owner_view"].get("devices", [])]
        env["driver"] = ("fake" if "fakecuda" in lib or any(n.startswith("fakecuda") for n in names)
                         else ("real" if lib else "unknown"))
        with open(sys.argv[2], "w") as f:
            json.dump(env, f, indent=1)
    elif cmd == "content":  # SIZE OFFSET SEED [bad]
        size, off, seed = (int(x) for x in sys.argv[2:5])
        print(json.dumps(content(size, off, seed, corrupt=sys.argv[5:] == ["bad"])))
    else:
        raise SystemExit(f"gpu-proof-tool.py: unknown command {cmd}")

main()
