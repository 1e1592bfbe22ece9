# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_kvcr_global_optspecs
    string join \n h/help V/version
end

function __fish_kvcr_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_kvcr_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_kvcr_using_subcommand
    set -l cmd (__fish_kvcr_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c kvcr -n "__fish_kvcr_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_needs_command" -s V -l version -d 'Print version'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "audit" -d 'Read-only audit of a retained inventory: per-rank verdicts (docs/format.md §5)'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "import" -d 'All-or-nothing GPU import of one group, for operator recovery (docs/format.md §8)'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "explain" -d 'What a finding code means and what to do; no CODE lists them all'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "merge" -d 'Merge per-node audit reports (--format json) into verdicts for groups spanning nodes'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "profile" -d 'Print a deployment profile derived from the live audit of an accepted group'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "gms" -d 'Read-only check of what Dynamo\'s GPU Memory Service left on this node (docs/format.md §14)'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "pools" -d 'Read-only check of NVIDIA KVCR\'s pool files: journal, handback, slots, liveness (docs/format.md §16)'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "offload" -d 'Read-only check of the disk offload tiers vLLM, llm-d and LMCache leave on a node (docs/format.md §15)'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "examine" -d 'Decode and check one descriptor file on its own (like mdadm --examine)'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "completions" -d 'Print a shell completion script: source <(kvcr completions bash)'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "schema" -d 'Print the JSON Schema (draft 2020-12) of a report, a descriptor, a profile, the ready file, the error document, the GMS, offload or pools report'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "seal" -d 'Write the canonical digest into descriptor files written without one (docs/format.md §3.5)'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "digest" -d 'Print the canonical digest (sha256:...) of a descriptor file (docs/format.md §3.2)'
complete -c kvcr -n "__fish_kvcr_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l profile -d 'Deployment profile (kvcr.profile/v1) declaring what the group should be (default: $KVCR_PROFILE); import requires one (docs/format.md §8.9)' -r -F
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l engine -d 'Limit the run to the group with this engine_id' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l min-epoch -d 'Reject current descriptors whose epoch is below N (overrides the profile)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l max-age -d 'Reject descriptors sealed more than this long ago (overrides the profile): plain seconds, or a number with s, m, h or d (90s, 15m, 2h, 1d)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l local-ranks -d 'The ranks this node holds of a group spanning nodes, e.g. 0-7 or 0-3,8-11 (overrides the profile); other ranks are expected elsewhere' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l incarnation -d 'Pin the current owner lifetime of the group that has this incarnation (overrides the profile\'s incarnation); its other incarnations are notices' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l producer-user -d 'The producer\'s user (a name or a uid): files and directories it owns are trusted like root\'s and the invoking user\'s, for a root audit of a sidecar that runs as its own user (default: $KVCR_PRODUCER_USER; docs/format.md §2.4)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l textfile -d 'Also write the Prometheus metrics (docs/format.md §9.5) to PATH, atomically, for node-exporter\'s textfile collector; PATH may not lie inside the inventory' -r -F
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l format -d 'Output format (json: exactly one document on stdout)' -r -f -a "table\t''
json\t''
prometheus\t'Prometheus text exposition format (audit and merge; docs/format.md §9.5)'"
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l color -d 'Colour: auto follows the terminal, NO_COLOR and TERM=dumb' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l live -d 'Also check against this node: boot id, hostname, owner and writer processes, GPUs present'
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -l strict -d 'With --live: a fact that could not be read (boot id, hostname, owner, writer, GPU) rejects its rank, as it refuses an import (docs/format.md §8.9)'
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -s q -l quiet -d 'Print nothing; the exit status still tells'
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -s v -l verbose -d 'Show every check per rank, including facts not checked'
complete -c kvcr -n "__fish_kvcr_using_subcommand audit" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l profile -d 'Deployment profile (kvcr.profile/v1) declaring what the group should be (default: $KVCR_PROFILE); import requires one (docs/format.md §8.9)' -r -F
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l engine -d 'Limit the run to the group with this engine_id' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l min-epoch -d 'Reject current descriptors whose epoch is below N (overrides the profile)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l max-age -d 'Reject descriptors sealed more than this long ago (overrides the profile): plain seconds, or a number with s, m, h or d (90s, 15m, 2h, 1d)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l local-ranks -d 'The ranks this node holds of a group spanning nodes, e.g. 0-7 or 0-3,8-11 (overrides the profile); other ranks are expected elsewhere' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l incarnation -d 'Pin the current owner lifetime of the group that has this incarnation (overrides the profile\'s incarnation); its other incarnations are notices' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l producer-user -d 'The producer\'s user (a name or a uid): files and directories it owns are trusted like root\'s and the invoking user\'s, for a root audit of a sidecar that runs as its own user (default: $KVCR_PRODUCER_USER; docs/format.md §2.4)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l ready-file -d 'With --hold: write this file atomically once every rank is imported; removed on release' -r -F
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l fleet-report -d 'With --local-ranks: a `kvcr merge --format json` report, built from live reports, that accepts the whole group and names this host and boot id for exactly these ranks (docs/format.md §8.9)' -r -F
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l max-report-age -d 'The oldest --fleet-report input accepted: plain seconds, or a number with s, m, h or d (default 300 s)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l format -d 'Output format (json: exactly one document on stdout)' -r -f -a "table\t''
json\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l color -d 'Colour: auto follows the terminal, NO_COLOR and TERM=dumb' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l dry-run -d 'Audit and print the plan (rank → GPU → allocations) without any CUDA call'
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l hold -d 'Keep the group imported until SIGINT/SIGTERM (default: trial import, then release)'
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -l map-read-write -d 'Map VMM memory (fabric, posix_fd) read-write instead of read-only, for a driver that refuses read-only access. kvcr never writes GPU memory'
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -s q -l quiet -d 'Print nothing; the exit status still tells'
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -s v -l verbose -d 'Show every allocation of each rank (and, when refused, every check per rank)'
complete -c kvcr -n "__fish_kvcr_using_subcommand import" -s h -l help -d 'Print help'
complete -c kvcr -n "__fish_kvcr_using_subcommand explain" -s h -l help -d 'Print help'
complete -c kvcr -n "__fish_kvcr_using_subcommand merge" -l format -d 'Output format (json: exactly one document on stdout)' -r -f -a "table\t''
json\t''
prometheus\t'Prometheus text exposition format (audit and merge; docs/format.md §9.5)'"
complete -c kvcr -n "__fish_kvcr_using_subcommand merge" -l color -d 'Colour: auto follows the terminal, NO_COLOR and TERM=dumb' -r -f -a "auto\t''
always\t''
never\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand merge" -s q -l quiet -d 'Print nothing; the exit status still tells'
complete -c kvcr -n "__fish_kvcr_using_subcommand merge" -s v -l verbose -d 'Show every check per rank, including facts not checked'
complete -c kvcr -n "__fish_kvcr_using_subcommand merge" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand profile" -l engine -d 'The group to derive the profile of (required when the inventory holds several)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand profile" -l incarnation -d 'Pin the current owner lifetime of the group that has this incarnation' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand profile" -l producer-user -d 'The producer\'s user (a name or a uid): files and directories it owns are trusted like root\'s and the invoking user\'s, for a root audit of a sidecar that runs as its own user (default: $KVCR_PRODUCER_USER; docs/format.md §2.4)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand profile" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand gms" -l num-blocks -d 'The block count the engine will ask recovery metadata for (default: the one its size implies)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand gms" -l binding -d 'The binding digest (64 hex digits) the engine will compute for its KV pool; without it the binding is not checked' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand gms" -l interval-ms -d 'Milliseconds between the two reads (0 to 60000)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand gms" -l format -d 'Output format (json: exactly one kvcr.gms-report/v1 document on stdout)' -r -f -a "table\t''
json\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand gms" -l live -d 'Also check this node\'s processes: lease owners under GMS\'s default owner id, and a held recovery barrier\'s owner'
complete -c kvcr -n "__fish_kvcr_using_subcommand gms" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l socket-path -d 'The service\'s --socket-path (ties the listening service to its pools)' -r -F
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l guard-count -d 'The service\'s --guard-count: pool_0 … pool_{N-1} are expected' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l pool-sizes-gb -d 'The service\'s --pool-sizes-gb (GiB, comma-separated, each rounded down to the page)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l journal-bytes -d 'KVCR\'s journal_bytes (its service CLI always uses 104857600)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l pool-layouts -d 'The claimant\'s pool_layouts as NAME:BLOCK_BYTES,... (vLLM: one pool with an empty name, ":<row bytes>")' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l compatibility-digest -d 'The service\'s --compatibility-digest (checks a handback region\'s digest)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l page-size -d 'The writing host\'s page size (mmap.PAGESIZE)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l g3-paths -d 'G3Options.paths, in the primary\'s order (comma-separated or repeated)' -r -F
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l capacity-bytes-per-file -d 'G3Options.capacity_bytes_per_file' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l identity -d 'The original file\'s (st_dev, st_ino), to check a copy\'s handback digest' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l interval-ms -d 'Milliseconds between the two reads (0 to 60000)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l format -d 'Output format (json: one kvcr.pools-report/v1 document on stdout)' -r -f -a "table\t''
json\t''
prometheus\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -l live -d 'Also say who holds each pool (/proc/locks, /proc/net/unix): live, leaked, orphan, or not checked and why'
complete -c kvcr -n "__fish_kvcr_using_subcommand pools" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l producer -d 'Which producer\'s layout to read (auto: recognised by shape and content)' -r -f -a "auto\t''
vllm\t''
llmd\t''
lmcache\t''
lmcache-mp\t''
sglang\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l format -d 'Output format (json: one kvcr.offload-report/v1 document on stdout)' -r -f -a "table\t''
json\t''
prometheus\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l threads -d 'Threads for rank directories and a root\'s statx calls (default: the CPUs, at most 16)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l progress -d 'When to draw a spinner on stderr (never in the JSON or Prometheus output)' -r -f -a "auto\t'Only when stderr is a terminal'
always\t''
never\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l list -d 'Name up to N incomplete or damaged blocks per set in the table' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l kv-bytes-per-chunk -d 'vLLM: the bytes of one file, the row the worker logs as `row=` in "Registering full CPU offload region"' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l bytes-per-block -d 'llm-d: the bytes one GPU block occupies on one rank across its group\'s KV tensors (tensors × stride(0) × element size), as N for every group or G=N for group G; repeatable' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l chunk-bytes -d 'LMCache (local disk and multiprocess): the bytes of one rank\'s full chunk (kv × layers × chunk_size × heads per rank × head_dim × itemsize)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l page-bytes -d 'SGLang: the bytes of one rank\'s KV page file on one pipeline stage (2 × layers × page_size × KV heads per rank × head_dim × itemsize; MLA: layers × page_size × (kv_lora_rank + qk_rope_head_dim) × itemsize)' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -l model -d 'SGLang: the served model name its files are keyed on (--served-model-name, else --model-path, with "-<tag>" where the host pool has a storage-format tag); repeatable. Without it, names whose model could end in _<digits> are reported as ambiguous' -r
complete -c kvcr -n "__fish_kvcr_using_subcommand offload" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand examine" -l format -d 'Output format' -r -f -a "table\t''
json\t''"
complete -c kvcr -n "__fish_kvcr_using_subcommand examine" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand schema" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand seal" -s q -l quiet -d 'Print nothing on success; refusals (and what --reseal-edited overrode) still go to stderr'
complete -c kvcr -n "__fish_kvcr_using_subcommand seal" -l reseal-edited -d 'Also seal a file whose digest does not match its content (edited or damaged after sealing: KV008), as it is now; without this flag such a file is refused. Say so only after checking what changed'
complete -c kvcr -n "__fish_kvcr_using_subcommand seal" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand digest" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "audit" -d 'Read-only audit of a retained inventory: per-rank verdicts (docs/format.md §5)'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "import" -d 'All-or-nothing GPU import of one group, for operator recovery (docs/format.md §8)'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "explain" -d 'What a finding code means and what to do; no CODE lists them all'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "merge" -d 'Merge per-node audit reports (--format json) into verdicts for groups spanning nodes'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "profile" -d 'Print a deployment profile derived from the live audit of an accepted group'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "gms" -d 'Read-only check of what Dynamo\'s GPU Memory Service left on this node (docs/format.md §14)'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "pools" -d 'Read-only check of NVIDIA KVCR\'s pool files: journal, handback, slots, liveness (docs/format.md §16)'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "offload" -d 'Read-only check of the disk offload tiers vLLM, llm-d and LMCache leave on a node (docs/format.md §15)'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "examine" -d 'Decode and check one descriptor file on its own (like mdadm --examine)'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "completions" -d 'Print a shell completion script: source <(kvcr completions bash)'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "schema" -d 'Print the JSON Schema (draft 2020-12) of a report, a descriptor, a profile, the ready file, the error document, the GMS, offload or pools report'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "seal" -d 'Write the canonical digest into descriptor files written without one (docs/format.md §3.5)'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "digest" -d 'Print the canonical digest (sha256:...) of a descriptor file (docs/format.md §3.2)'
complete -c kvcr -n "__fish_kvcr_using_subcommand help; and not __fish_seen_subcommand_from audit import explain merge profile gms pools offload examine completions schema seal digest help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
