//! `kvcr explain`: what each finding means, what kvcr checked, the safe next step.

use crate::format::finding::{Code, Severity};

pub struct Explanation {
    pub code: Code,
    pub severity: Severity,
    /// What the finding means.
    pub meaning: &'static str,
    /// What exactly kvcr looked at.
    pub checked: &'static str,
    /// The one safe next step.
    pub action: &'static str,
    /// True when the finding is only made in live mode (or has a live part).
    pub live: &'static str,
}

// long: a table, one arm per finding code with its four texts; split, a
// code's texts would be looked for in several places.
pub fn explain(code: Code) -> Explanation {
    use Code::*;
    let (meaning, checked, action, live) = match code {
        KV001 => (
            "An entry below the inventory root is a symbolic link. kvcr never follows links below \
                the root: a link can point a descriptor name at memory another group owns, or \
                outside the inventory altogether.",
            "Every entry's lstat during the walk (the link's target is read with readlink and \
                shown, never opened), and again at open time (openat2 with RESOLVE_NO_SYMLINKS, \
                or O_NOFOLLOW per component), so a file swapped for a link mid-audit is caught \
                too.",
            "replace the link with the real descriptor file written by the owner, or remove it; \
                never copy the target in by hand",
            "",
        ),
        KV002 => (
            "An entry is not a regular file: a FIFO, socket or device node, or a directory \
                carrying a descriptor's name; or a descriptor is a regular file with more than \
                one hard link (another name, perhaps outside the inventory, reaches the same \
                file).",
            "The file type from lstat during the walk, at any depth, and from fstat on an O_PATH \
                fd before anything is opened for reading; a regular file is then reopened through \
                that fd, so a FIFO or device swapped in is never opened. The link count \
                (st_nlink) from fstat of the open descriptor; kvcr seal refuses such a file by \
                the same rule.",
            "remove the entry; descriptors are always regular files written by the owner (a hard \
                link: remove its other names, which find -samefile lists, or have the owner \
                rewrite the descriptor, which leaves one link)",
            "",
        ),
        KV003 => (
            "A file or directory in the inventory is writable by group or others, or owned by a \
                uid that is neither root, the invoking user nor the declared producer user, so \
                someone else could have planted or edited it; or a directory below the root is \
                another mount (a bind mount, another file system), which kvcr does not enter. In \
                live mode also: a descriptor carrying cuda_ipc or fabric handle bytes is readable \
                by group or others, and those bytes grant access to the GPU memory.",
            "st_mode and st_uid from fstat of every descriptor and lstat of every directory (the \
                root included); a descriptor below an unsafe directory is rejected too. Mounts: \
                each directory's st_dev and statx mount id against the root's, and openat2 \
                RESOLVE_NO_XDEV for every open. Live mode also checks the read bits of \
                descriptors that carry handle bytes.",
            "have the owner rewrite the inventory with mode 0700 directories and 0600 files owned \
                by its own user, then audit again; when the files are the producer's and it runs \
                as its own user while kvcr runs as another (root, for the packaged units), declare \
                the producer's user instead: --producer-user USER, or KVCR_PRODUCER_USER in \
                /etc/default/kvcr (docs/format.md §2.4)",
            "the handle-exposure part is checked only with --live",
        ),
        KV004 => (
            "A descriptor is larger than 1 MiB, far beyond any real one; it is rejected unread.",
            "st_size before reading, and a hard cap while reading (st_size is not trusted alone).",
            "inspect the file; a descriptor this large was not written by the owner",
            "",
        ),
        KV005 => (
            "A descriptor could not be opened or read, or it changed while kvcr was reading it.",
            "open(2)/read(2) results, and that the opened file is the one that was listed (same \
                device and inode).",
            "check the file's permissions and the filesystem, then audit again",
            "",
        ),
        KV006 => (
            "A descriptor is not well-formed JSON: invalid UTF-8, a byte order mark, a syntax \
                error, a duplicate key, data after the document, or nesting deeper than 32. A \
                file the producer writes in place is read half-written when it dies mid-write; \
                the producer's fix is an atomic write: write a staging file, fsync it, rename \
                it over rank-<R>.json (docs/format.md §3.5).",
            "A strict JSON reader with a depth bound, run before any typed parsing.",
            "treat the file as corrupt; let the owner rewrite it, or start the engine with an \
                empty cache",
            "",
        ),
        KV007 => (
            "A descriptor is JSON but breaks the descriptor v1 schema: wrong schema string, a \
                missing or unknown field, a wrong type, a float, an out-of-range value, or an \
                overflow in the geometry arithmetic.",
            "Every field of docs/format.md §3 with its type and range; the message names the \
                field, the expected and the found value.",
            "fix the writer (the descriptor is not v1), or start the engine with an empty cache",
            "",
        ),
        KV008 => (
            "The descriptor's digest does not match its content: the file is torn or was edited \
                after the owner sealed it. The owner's writer seals the value it builds; `kvcr \
                seal FILE` refuses this file (KV008, naming both digests) rather than launder \
                it, and only `kvcr seal --reseal-edited FILE`, after checking what changed, \
                seals it as it is now, saying what it overrode.",
            "SHA-256 over the canonical form (docs/format.md §3.2) of the descriptor without its \
                digest member.",
            "do not import; have the owner reseal the descriptor, or start with an empty cache",
            "",
        ),
        KV009 => (
            "A staging leftover (.NAME.tmp) of an interrupted write: the owner died between \
                writing and renaming. This is the atomic write working as meant (write a \
                staging file, fsync it, rename it over rank-<R>.json; docs/format.md §3.5): \
                rank-<R>.json was never half-written. A producer that leaves them behind \
                should remove its own leftovers when it starts.",
            "The file name only; leftovers are never opened.",
            "a write may be in progress: audit again in a few seconds; a leftover that stays is \
                an interrupted write: once no owner is writing, remove it and audit again",
            "",
        ),
        KV010 => (
            "An unexpected file in the inventory (not rank-N.json, not a staging leftover), or a \
                regular file deeper than 8 levels, which is not read (symlinks, devices and other \
                mounts are rejected at any depth). A notice only.",
            "The file name and depth (a name that is a GMS artifact's, a lease ring, recovery \
                metadata or a writer-cohort directory's file, is named as such: check it with \
                kvcr gms).",
            "nothing required; move unrelated files out of the inventory to keep audits quiet",
            "",
        ),
        KV101 => (
            "A descriptor's rank is wrong: rank ≥ world_size, the rank in the file name differs \
                from the rank in the content, or world_size ≠ tp × pp.",
            "The file name's R against the content's rank; rank against world_size; world_size \
                against tp × pp.",
            "do not rename files to fix this; the owner must rewrite the rank's descriptor",
            "",
        ),
        KV102 => (
            "Two current descriptors claim the same rank; kvcr cannot tell which one holds that \
                rank's memory.",
            "Rank slots of every descriptor of the current incarnation (both paths are named).",
            "find which owner really holds that rank (the owner pids in both files) and remove \
                the other descriptor",
            "",
        ),
        KV103 => (
            "A rank of the group has no current descriptor. A tensor-parallel group is usable \
                only whole, so the group is rejected.",
            "Ranks 0..world_size-1 of the current incarnation; an older incarnation is never used \
                to fill the gap. kvcr merge counts them over every node's report, and a node's \
                report written without --local-ranks rejects the group for the ranks other nodes \
                hold: there the step is to audit each node again with --local-ranks naming its \
                own ranks, then merge.",
            "restore the missing rank's descriptor from its owner if it still lives; otherwise \
                start the engine with an empty cache",
            "",
        ),
        KV104 => (
            "A rank's shape differs from the group's: world_size, tp, pp or a geometry field \
                differs from the profile or the reference rank, the allocations are smaller than \
                the geometry needs (docs/format.md §3.1), or an allocation id repeats.",
            "Each of world_size, tp, pp and every geometry field against the profile (where it \
                declares them) else the reference rank (rank 0, or the lowest valid rank); the \
                sum of size_bytes against the docs/format.md §3.1 arithmetic.",
            "do not import: the memory was laid out for another shape; start the engine with an \
                empty cache or the matching profile",
            "",
        ),
        KV105 => (
            "A rank's model identity (name, revision or quantization) differs from the profile or \
                the reference rank: its KV was computed by another model.",
            "model.name, model.revision and model.quantization, compared exactly.",
            "do not import; start the engine with an empty cache",
            "",
        ),
        KV106 => (
            "A rank's GPU is wrong: one GPU is claimed by two ranks, it is not the GPU the \
                profile gives for that rank, or (live) no such GPU is on this node or visible to \
                this process.",
            "gpu_uuid of every current rank against the others and the profile's gpus list; in \
                live mode against the GPUs the CUDA driver (or /proc/driver/nvidia) reports.",
            "check CUDA_VISIBLE_DEVICES and the node's GPUs (nvidia-smi -L; on MIG one process \
                sees a single MIG device); never import onto another GPU",
            "the presence part is checked only with --live",
        ),
        KV107 => (
            "Incarnation trouble: a descriptor is not the profile's pinned incarnation (a notice: \
                it is not counted), two incarnations tie on the highest epoch, or ranks of one \
                incarnation disagree on its epoch.",
            "The incarnation and epoch of every descriptor of the group.",
            "pin the live owner lifetime with --incarnation UUID (or the profile's incarnation), \
                or remove the descriptors of the dead owner lifetime",
            "",
        ),
        KV108 => (
            "A descriptor is stale: superseded by a newer epoch of the group (a notice: it is not \
                counted), below min_epoch, older than max_age_s, dated before 2001 (a \
                created_unix_ms below 10^12, plausibly seconds, so its age cannot be proven), or \
                (live) the node rebooted since, or the owner process is gone or its PID was \
                reused.",
            "Epochs across incarnations; epoch against min_epoch; created_unix_ms against 10^12, \
                the clock and max_age_s; in live mode boot_id against \
                /proc/sys/kernel/random/boot_id and owner pid/start_ticks against \
                /proc/<pid>/stat.",
            "do not import stale memory; start the engine with an empty cache",
            "the reboot and owner parts are checked only with --live",
        ),
        KV109 => (
            "(live) The engine process that wrote this rank's KV still runs and has not marked \
                the rank quiesced: the memory may change under an importer.",
            "writer.pid and writer.start_ticks against /proc/<pid>/stat, and writer.quiesced.",
            "stop the old engine process (or wait for it to quiesce), then audit again",
            "checked only with --live",
        ),
        KV110 => (
            "The descriptor does not belong to this inventory's node. One inventory holds one \
                node's descriptors: every current descriptor of a group must name the same \
                node.hostname (ASCII case-insensitive) and node.boot_id, with or without --live. \
                In live mode also: the descriptor was written on another node, so its handles \
                mean nothing here.",
            "node.hostname and node.boot_id of every current descriptor against the reference \
                rank's (always); with --live, node.hostname against this node's hostname. In \
                `kvcr merge`: a report that names no host.",
            "audit each node's inventory on that node; never copy descriptors between nodes or \
                inventories",
            "the comparison with this node's hostname is made only with --live",
        ),
        KV111 => (
            "One memory handle appears twice among current descriptors: twice in one descriptor \
                (its size sum counts the memory twice), in two ranks of a group (two ranks would \
                share one cache), or in two groups of one inventory (one memory would back two \
                engines' caches). A handle's identity is its kind and bytes: the 64 bytes of a \
                cuda_ipc or fabric handle, the owner pid and fd of a posix_fd.",
            "Every allocation's handle of every current descriptor, within the group and across \
                the inventory's groups (also under --engine), by an identity derived from the \
                kind and all 64 bytes (posix_fd: owner pid and fd): equal handles always match.",
            "do not import: have the owner re-export one handle per allocation and rewrite the \
                descriptors, then audit again",
            "",
        ),
        // The GMS reader's codes (docs/format.md §14.6).
        KV201 => (
            "A GMS lease ring (GMSL) has 32-byte records: the oldest lease-ring layout, which no \
                current GMS writes. kvcr reports it and does not decode it as the current \
                layout; the next GMS client to open it finds an invalid header and \
                re-initialises the file, wiping every lease it holds.",
            "The header's magic (GMSL), version (1) and record_size (32; the current layout is \
                16), read without any lock.",
            "stop every engine of the old GMS version on this node before starting a current \
                one; the current client re-creates the ring, and the leases in it are lost",
            "",
        ),
        KV202 => (
            "A GMS lease ring's header is not one GMS accepts: the magic (byte-swapped or \
                wrong), the version (not 1), the record size (neither 16 nor 32) or total_blocks \
                (0). GMS itself treats such a header as invalid and re-initialises the file at \
                the next client, wiping every lease.",
            "The 64-byte header's magic (0x4C534D47, on disk GMSL), version, record_size and \
                total_blocks; a file found where GMS puts its rings (gms-kv-lease-*.shm, \
                $GMS_KV_LEASE_SHM_PATH) is judged as a ring even when its magic is wrong.",
            "do not copy or edit the ring; find the program that wrote it (not GMS, or another \
                version) and stop it; the next GMS client re-creates the ring empty",
            "",
        ),
        KV203 => (
            "A GMS lease ring's size is not 64 + record_size × total_blocks: smaller is \
                truncated, larger is foreign. GMS itself extends a short ring and accepts a \
                longer one, so the file is not what GMS last wrote.",
            "fstat's st_size against the header's total_blocks and record_size.",
            "do not start an engine on this ring until it is understood: a truncated ring lost \
                the records of its last blocks; remove it once no engine maps it (the next \
                client re-creates it)",
            "",
        ),
        KV204 => (
            "A GMS lease record holds a state GMS never writes (valid states: 0 FREE, 1 LEASED, \
                2 SEALED, 3 RESERVED, 4 TRANSITION).",
            "The state word (u32 at record offset 0) of every record, in both reads.",
            "treat the ring as corrupt: stop the engines that map it and let a fenced successor \
                re-create it (GMS_KV_LEASE_SHM_RESET)",
            "",
        ),
        KV205 => (
            "A GMS lease record is in TRANSITION in both reads: a writer died in the middle of an \
                acquire, seal, adopt or release. A healthy ring shows TRANSITION only for a \
                moment, so a record seen once is a notice.",
            "The state of every record in two reads a documented interval apart (--interval-ms); \
                a block is counted when it is in TRANSITION in both.",
            "fence the dead writer (the failover lock), then let the successor run GMS's \
                post-fence reclaim, which rolls interrupted transitions forward to FREE (or back \
                to SEALED for directory-protected blocks); never edit the ring by hand",
            "",
        ),
        KV206 => (
            "A GMS lease record's owner does not match its state: a FREE or RESERVED record with \
                a non-zero owner hash, or a LEASED record with owner 0. GMS never leaves a \
                record so at rest.",
            "owner_hash (u64 at record offset 8) against the state of every record, in both \
                reads.",
            "treat the ring as corrupt: fence its writers and let the successor run GMS's \
                post-fence reclaim, which recomputes the free count",
            "",
        ),
        KV207 => (
            "SEALED lease records with owner 0: a post-fence reclaim that protects \
                directory-advertised blocks puts an interrupted TRANSITION back to SEALED without \
                an owner. A real GMS state, not corruption: the foreign-owner reclaim skips \
                owner-0 records, so only an adopt through the content directory frees them. A \
                notice only.",
            "owner_hash of every SEALED record.",
            "nothing required; the blocks stay sealed until an engine adopts them through the \
                content directory; without a directory they stay unusable until the ring is \
                re-created",
            "",
        ),
        KV208 => (
            "A GMS lease ring's free_count is not the number of FREE records while no mutation is \
                in flight, in both reads and with the ring unchanged between them: acquires will \
                fail early, or over-promise.",
            "The header's free_count against the count of FREE records, only in reads where \
                active_mutations is 0.",
            "fence the ring's writers, then let the successor run GMS's post-fence reclaim, which \
                recomputes the free count from the records",
            "",
        ),
        KV209 => (
            "A GMS lease ring counts record mutations in flight (active_mutations > 0) in both \
                reads, with the same count and no record changed between them: a writer died \
                inside a mutation and stranded its count. A ring in use shows a count for a \
                moment, so a count seen once, or on a ring that changed, is a notice.",
            "active_mutations (u64 at header offset 24) in two reads, and whether any record \
                changed between them.",
            "fence the dead writer, then let the successor run GMS's post-fence reclaim, which \
                drains or forces the count and recovers the records",
            "",
        ),
        KV210 => (
            "A GMS lease ring's recovery barrier is held (active_mutations all ones) in both \
                reads: every acquire spins and then fails. During a post-fence reclaim this is \
                normal for a moment; with --live, a barrier whose recovery_owner_pid is alive is \
                a recovery in progress (a notice), and one whose owner is gone is stranded.",
            "active_mutations == u64::MAX in two reads; with --live, recovery_owner_pid (header \
                offset 56, written only by the newest ring) against /proc. That pid is never \
                cleared after a recovery, so it is read only while the barrier is held.",
            "if a recovery is running, wait for it; a stranded barrier is taken over by the next \
                fenced successor's reclaim (GMS steals it from a dead owner); never clear it by \
                hand while an engine runs",
            "the recovery owner's liveness is checked only with --live",
        ),
        KV211 => (
            "A GMS lease ring reserves more blocks than it has (reserved_blocks > total_blocks).",
            "reserved_blocks (u32 at header offset 40) against total_blocks.",
            "treat the ring as corrupt: fence its writers and let the successor re-create it",
            "",
        ),
        KV212 => (
            "A GMS lease ring's reservation_epoch is odd in both reads: a reservation update \
                (a seqlock, in the ring versions that have one) was torn by a writer's death. \
                The newest ring never writes the field, so only an older ring produces it.",
            "reservation_epoch (u64 at header offset 32) in two reads.",
            "fence the ring's writers and re-create the ring with the engines' current GMS \
                version",
            "",
        ),
        KV213 => (
            "(live) GMS leases whose owner hash matches no running process under GMS's default \
                owner id ({engine}-{pid}-{device} for vllm, sglang and trtllm, every device on \
                the node): orphaned leases of a dead engine that only a post-fence reclaim \
                frees. An owner id set by GMS_KV_LEASE_OWNER_ID (or per engine) cannot be \
                checked, and would look orphaned here.",
            "The first 8 bytes of sha256(owner id), little-endian, for every process in /proc, \
                every engine name and every device, against the owner hash of every LEASED and \
                SEALED record.",
            "fence the dead engine (its failover lock), then let its successor run GMS's \
                post-fence reclaim on this engine's and device's own ring only; never reclaim a \
                whole directory of rings",
            "checked only with --live",
        ),
        KV221 => (
            "GMS recovery metadata (DYNKV001) is not exactly 4096 + 128 × num_blocks bytes: GMS \
                would resize it and start FRESH, discarding every record.",
            "st_size against --num-blocks, or, without it, a size that some block count explains.",
            "nothing to recover from this file: start the engine; GMS re-creates it (FRESH)",
            "",
        ),
        KV222 => (
            "GMS recovery metadata found where GMS keeps it ($DYN_KV_RECOVERY_PATH, \
                $GMS_SOCKET_DIR/kv-recovery.mmap) does not start with the magic DYNKV001: GMS \
                would start FRESH.",
            "The first 8 bytes, against the ASCII magic DYNKV001.",
            "nothing to recover: check that the path names GMS's metadata file, not another \
                file; GMS re-creates it at the next takeover",
            "",
        ),
        KV223 => (
            "GMS recovery metadata has epoch 0: no takeover ever committed, so GMS would start \
                FRESH.",
            "epoch (u64 at offset 16).",
            "nothing to recover; the next takeover starts FRESH",
            "",
        ),
        KV224 => (
            "GMS recovery metadata's commit is not its epoch: a takeover began (epoch bumped, \
                commit 0) and did not finish, or the header is damaged; GMS would start FRESH. \
                Seen in one read only, it is a takeover in progress (a notice).",
            "commit (u64 at offset 24) against epoch, in two reads.",
            "nothing to recover; if no takeover is running, the writer died mid-takeover and the \
                next one starts FRESH",
            "",
        ),
        KV225 => (
            "GMS recovery metadata is bound to another KV pool than --binding names: other \
                allocations (GPU UUIDs, the server nonce), another geometry or another model. \
                GMS would start FRESH.",
            "The 32-byte binding at offset 32 against --binding HEX (the sha256 GMS computes \
                over the allocations and the KV manifest).",
            "do not reuse this metadata for this pool; GMS starts FRESH, which is the safe \
                outcome",
            "",
        ),
        KV226 => (
            "A GMS recovery record's valid word is neither 0 (empty) nor 1 (valid): any other \
                value makes GMS discard the whole file (FRESH). A writer crash never leaves it; \
                it comes from corruption.",
            "valid (u64 at record offset 0) of records 1..num_blocks-1 (record 0 is never used).",
            "nothing to recover; keep the file for diagnosis if the corruption needs explaining, \
                else let GMS re-create it",
            "",
        ),
        KV227 => (
            "A valid GMS recovery record fails its CRC (zlib crc32 of record bytes 8..87): GMS \
                discards the whole file (FRESH). A writer killed while publishing leaves valid 0, \
                never a bad CRC, so this is corruption.",
            "The stored crc32 (record offset 88) against the crc32 kvcr computes, for every record \
                with valid 1.",
            "nothing to recover; keep the file for diagnosis, else let GMS re-create it",
            "",
        ),
        KV228 => (
            "A valid GMS recovery record has illegal lengths: hash_len outside 5..68 or \
                num_tokens 0. GMS discards the whole file (FRESH).",
            "hash_len (u32 at record offset 8) and num_tokens (u64 at offset 12) of every record \
                with valid 1 and a correct CRC.",
            "nothing to recover; keep the file for diagnosis, else let GMS re-create it",
            "",
        ),
        KV229 => (
            "The outcome of GMS recovery metadata was judged without its binding: without \
                --binding kvcr cannot tell whether the file belongs to the KV pool that will \
                read it, and GMS starts FRESH when it does not. A notice only.",
            "Nothing: the binding is printed, not compared.",
            "pass --binding HEX (the binding digest the engine computes) to check it",
            "",
        ),
        KV231 => (
            "A writer cohort's predecessor is not retired: its cohort file carries no tombstone \
                (size 0: joiners are still admitted) or a byte other than R (joiners refuse it, \
                but GMS's fence proof needs exactly R). The predecessor named by .predecessor \
                (vLLM) must be retired before the successor may reuse KV.",
            "The first byte of the predecessor's cohort file, read without a lock.",
            "do not start the successor's KV reuse; let the successor's fence retire the \
                predecessor (it writes R), or stop the predecessor's processes",
            "",
        ),
        KV232 => (
            "A writer of a retired or predecessor cohort still runs: the kernel lists a lock on \
                its cohort file, held by a process that is not exiting, in both reads. Its CPU \
                side can still enqueue GPU work against KV the successor reuses. A holder that \
                is exiting (PF_EXITING, or SIGKILL pending) is the legitimate end of a fence, a \
                notice.",
            "/proc/locks (a listed lock is held, whatever its recorded pid: a forked child keeps \
                it), the holders found through /proc/<pid>/fdinfo, and each holder's threads in \
                /proc/<pid>/task/*/stat and status; where /proc/locks lists nothing, one \
                non-blocking exclusive flock probe, released at once.",
            "stop the listed processes (kill them; a process blocked in the driver exits when \
                the call returns), then run kvcr gms again; never remove or recreate the cohort \
                file",
            "",
        ),
        KV233 => (
            "A writer-cohort directory holds a staging file in both reads (<uuid>.<uuid>.active, \
                <uuid>.active, <uuid>.predecessor.<uuid>.pending, joining-<h>.<uuid>): a writer \
                died between writing a marker and renaming it into place. Seen once, it is a \
                write in progress (a notice).",
            "Entry names only; staging files are never parsed.",
            "once no launcher or fence is running, remove the staging file; the marker it was \
                meant to replace is unchanged",
            "",
        ),
        KV234 => (
            "A writer-cohort marker (active, <uuid>.predecessor) cannot be used: it is not one \
                32-hex uuid, or it names a cohort file that does not exist. GMS's fence raises \
                \"invalid ... writer-cohort identity\" and the takeover stops.",
            "The marker's content (at most 64 bytes, newline trimmed) and the cohort file it \
                names.",
            "find the launcher that wrote it; with no writer running, remove the broken marker so \
                the next fence writes a fresh one",
            "",
        ),
        KV235 => (
            "A writer-cohort lock could not be checked: the kernel's lock table lists nothing \
                for the file but a probe found it held (by a process outside this PID \
                namespace), or the file could not be opened for the probe; or a cohort file, \
                .leader or marker could not be opened or read (the errno is named). Never read \
                as free, open or empty. A notice only.",
            "/proc/locks, then one non-blocking flock probe (exclusive on a cohort file, shared on \
                a .leader), released at once.",
            "run kvcr in the PID namespace of the engines (the pod, with shareProcessNamespace) \
                or as root",
            "",
        ),
        KV236 => (
            "A vLLM joining marker names a retired or missing cohort: ranks started now would \
                wait for a fresh leader (GMS rejects a stale marker). A notice only.",
            "The content of joining-<h> against the cohort file it names.",
            "nothing required; the next launcher replaces the marker",
            "",
        ),
        KV241 => (
            "A file in a superseded GMS format (the DYNKVIX1 block-index store, the GMSKVIX1 or \
                GMSKVIX2 snapshot, the GMSKVGN1 generation counters): the designs that wrote \
                them were withdrawn upstream, no current GMS reads them, and one left next to \
                live leases is stale. Recognised by magic and size, never decoded as current.",
            "The magic and the header's counts against the size; the .rank<R> answers and \
                .status.jsonl beside a DYNKVIX1 store are listed by name, never read or \
                consumed.",
            "make sure no engine of the withdrawn design runs (GMS_KV_INDEX_PATH unset), then \
                remove the file and the files beside it",
            "",
        ),
        KV242 => (
            "A superseded GMS file's size does not match its own header (truncated, or records \
                that do not fill the file).",
            "DYNKVIX1: 4096 + 64 × num_blocks; GMSKVGN1: 4096 + 8 × num_blocks; GMSKVIX1/2: the \
                records walked to the end of the file.",
            "remove it once no engine of the withdrawn design runs",
            "",
        ),
        KV250 => (
            "A GMS artifact changed between kvcr's two reads in a way it cannot judge: a lease \
                ring's header geometry or size, or recovery metadata's epoch, commit or owner (a \
                takeover ran), or a cohort directory's markers. kvcr reports it and does not \
                guess which read is right.",
            "The identity fields of both reads.",
            "run kvcr gms again; if it keeps changing, something is re-initialising the artifact",
            "",
        ),
        KV301 => (
            "A vLLM or llm-d namespace's config.json is missing, not a regular file, not JSON the \
                producer writes (truncated by a killed writer, edited), or holds what the \
                producer never writes (a float, a lone surrogate, an integer beyond 64 bits). \
                vLLM and llm-d write it only when absent and without a temp file, so a truncated \
                one is kept forever; vLLM never reads it back.",
            "config.json opened beside the namespace's rank directories without following links \
                (at most 1 MiB), parsed as Python's json.loads does and re-serialised as the \
                producer hashes it.",
            "compare the namespace with the engine's --kv-transfer-config; if it is this \
                deployment's, stop the engines of this namespace and remove the namespace \
                directory (the engine recreates config.json only when it is missing)",
            "",
        ),
        KV302 => (
            "The namespace directory's name does not match its config.json: the first 12 hex \
                digits of the SHA-256 of the canonical fields, or the model prefix, differ. The \
                directory was copied, renamed or its config.json edited; the engine would never \
                open it for the configuration it records.",
            "The digest recomputed byte-exact from config.json (sorted keys, no whitespace, ASCII \
                escapes) against the directory's suffix, and model_name with / replaced by _ \
                against its prefix.",
            "find which deployment wrote it; if none owns it, remove the namespace directory",
            "",
        ),
        KV303 => (
            "A block (chunk, page) is missing on some of the ranks that must hold it: one rank was \
                evicted, a write was dropped or a writer was killed. llm-d's scheduler checks \
                rank 0 only and reports the missing rank's load as a success with the previous \
                file's bytes; SGLang stops the prefix at the first page one rank lacks.",
            "Every key of the set against every rank the set's identity requires (llm-d: _r0 … \
                _r{tp·pp·pcp−1}; lmcache-mp: every rank of the packed world size).",
            "remove the incomplete blocks on every rank (the engine recomputes them), or remove \
                the set",
            "",
        ),
        KV304 => (
            "A file is shorter than the size its producer writes: truncated after the rename (no \
                producer fsyncs), written in place by a killed LMCache writer, or a second \
                geometry in one namespace. vLLM deletes it at load, lmcache-mp and SGLang fail, \
                llm-d loads stale bytes and reports success.",
            "The file's size (statx) against the geometry option, or without one against the set's \
                common size and the other ranks of the block.",
            "remove the short file's block on every rank; if many are short, check the disk and \
                the engine's geometry options",
            "",
        ),
        KV305 => (
            "A file is longer than the size its producer writes: a block-size collision or a \
                second geometry hashed to the same namespace. Every producer loads the head \
                (llm-d the tail) of a long file without an error: wrong bytes.",
            "The file's size (statx) against the geometry option, or without one against the set's \
                common size.",
            "find the deployment with the other geometry and give it its own root; remove the long \
                files",
            "",
        ),
        KV306 => (
            "A file's size is not a non-zero multiple of the unit its producer writes in (vLLM: \
                4096-byte pages; llm-d: bytes per block).",
            "The file's size (statx) modulo the producer's unit.",
            "remove the file's block on every rank",
            "",
        ),
        KV307 => (
            "The ranks of one block disagree on its size where the producer writes equal sizes (TP \
                ranks of one stage): one rank wrote another geometry or a different number of \
                blocks. llm-d loads it as a success with wrong bytes.",
            "The sizes of the block's files on every rank of a set without pipeline or context \
                parallelism.",
            "remove the block on every rank",
            "",
        ),
        KV308 => (
            "A symbolic link where a block file, rank or bucket directory belongs. Every producer \
                follows it and loads the target's bytes; kvcr never follows it.",
            "statx with AT_SYMLINK_NOFOLLOW on every entry; directories are opened with \
                O_NOFOLLOW.",
            "replace the link with the real file or remove it",
            "",
        ),
        KV309 => (
            "A FIFO, socket, device or a directory where a block file belongs: an engine's open \
                may block or fail. kvcr never opens it.",
            "The entry's type from statx, before anything is opened.",
            "remove the entry",
            "",
        ),
        KV310 => (
            "A rank at or above the set's world size: llm-d's _r<N> with N ≥ tp·pp·pcp, an \
                lmcache-mp rank byte at or above its world byte. The recorded configuration \
                cannot produce it; no engine of this set reads it.",
            "The rank in the directory or file name against the world size from config.json or the \
                packed rank word.",
            "remove the files of that rank",
            "",
        ),
        KV311 => (
            "A staging file a writer left: empty (killed before writing), partial, or full (killed \
                before the rename). No producer reads or removes it; a recent one may belong to a \
                running writer.",
            "The producer's temp-file name grammar, the size and the modification time (statx); \
                the file is never opened.",
            "once no engine writes to this root, remove the staging file",
            "",
        ),
        KV312 => (
            "A name that no producer kvcr knows writes, at a root or inside a set. Listed, never \
                skipped.",
            "Each producer's file-name grammar, parsed strictly.",
            "find what wrote it; remove it if nothing owns it",
            "",
        ),
        KV313 => (
            "A file that legitimately holds fewer blocks than a full one (an llm-d chunk whose \
                group starts or ends mid-chunk, agreed by every rank).",
            "The size against the group's full size (geometry option) or the largest file of the \
                group, and the agreement of every rank.",
            "nothing; the engine loads it as written",
            "",
        ),
        KV314 => (
            "The evidence cannot settle which producer wrote a namespace or what a name means \
                (llm-d's config.json and vLLM 0.22.0's are identical; a name with @ in a field; an \
                SGLang name whose served model name may end in _<digits>, or of a model no \
                --model names). Only the checks every reading satisfies are made; SGLang names \
                that parse more than one way are listed, not judged.",
            "The config.json key set and the rank directories present; the name's fields.",
            "rerun with --producer naming the engine that wrote it (SGLang: --model with the \
                served model name)",
            "",
        ),
        KV315 => (
            "vLLM's filesystem tier keeps every worker's slice inside one file under _r0: a \
                missing worker slice is not visible on disk. Only truncation (the size) is \
                checked.",
            "Nothing beyond each file's size: stated so that a clean verdict never implies rank \
                completeness.",
            "nothing; the verdict covers the sizes only",
            "",
        ),
        KV316 => (
            "No geometry option was given, so files were checked against each other (one size per \
                set or per rank, the producer's alignment), not against the bytes a block must \
                have.",
            "The sizes of the set's files against each other.",
            "rerun with the geometry option the producer needs (kvcr offload --help names where \
                the engine logs each value)",
            "",
        ),
        KV317 => (
            "One directory holds sets of several world sizes (or salts, tags): each set is judged \
                alone and never paired with another.",
            "The identity fields in the file names.",
            "nothing, unless a deployment changed its parallel layout and the old sets can go",
            "",
        ),
        KV318 => (
            "vLLM's O_DIRECT probe file (.o_direct_probe_<n>.tmp), left by a start-up killed \
                during the probe. Harmless.",
            "The name beside config.json.",
            "remove it once no vLLM engine starts on this namespace",
            "",
        ),
        KV319 => (
            "An empty namespace (no rank directory) or empty bucket directories a failed store \
                left behind. Harmless.",
            "The directories' entries.",
            "nothing; remove them when convenient",
            "",
        ),
        KV320 => (
            "An agnostic vLLM namespace without canonical_format: written by vLLM ≤ 0.33's direct \
                layout, which is unsafe to read across a tensor-parallel change.",
            "The config.json keys parallel_agnostic (absent) and canonical_format (absent).",
            "do not share this namespace between deployments of different tensor-parallel sizes",
            "",
        ),
        KV321 => (
            "A vLLM block's group id is at or beyond the length of config.json's kv_cache_groups: \
                the engine leaves out groups that are not prefix-cacheable, so this is expected \
                on hybrid models.",
            "The _g<G> of each bucket directory against kv_cache_groups.",
            "nothing; hybrid models offload only their prefix-cacheable groups",
            "",
        ),
        KV322 => (
            "LMCache's local-disk backend indexes its files in memory only: after any engine \
                restart no engine reads these files again.",
            "The .pt names of the LMCache grammar.",
            "remove the files once no engine that wrote them runs",
            "",
        ),
        KV323 => (
            "A layout no current producer writes: llm-d ≤ v0.8.1's nested \
                block_size_…/tp_…/rank_<R>/<dtype>/ tree (judged all the same, as v0.8.1 wrote \
                it: every rank, files of at least 16 MiB; a current llm-d never reads it), \
                LMCache v0 names and unmerged .pt.meta sidecars (recognised, not judged).",
            "The directory shape and names.",
            "remove it once no engine of that version runs",
            "",
        ),
        KV350 => (
            "An SGLang HiCache directory holds an MLA set and a tensor-parallel set of the same \
                served model text: an MLA deployment's rank 0 owns the suffix _<model>_0_<tp> for \
                eviction, which is also the tensor-parallel set's rank-0 suffix, so with \
                max_size or min_free_space set it may evict the other deployment's files.",
            "The model text, pipeline and attention-CP parts of the two sets' suffixes.",
            "give the deployments distinct served model names or storage directories",
            "",
        ),
        KV351 => (
            "An LMCache GDS data file has no .metadata sidecar: the writer was killed between \
                renaming the data file and writing its sidecar. The engine's start-up scan reads \
                only sidecars, so after a restart the chunk is invisible.",
            "The <data>.metadata beside each data file.",
            "remove the data file (the engine recomputes the chunk)",
            "",
        ),
        KV352 => (
            "An LMCache GDS sidecar has no data file: the start-up scan registers the chunk from \
                the sidecar, and the load then fails.",
            "The data file beside each <data>.metadata.",
            "remove the sidecar",
            "",
        ),
        KV353 => (
            "An LMCache GDS sidecar differs from its data file's 4096-byte header: the engine \
                believes the sidecar (shape, dtype, byte count) and never reads the header.",
            "The sidecar's bytes against the data file's first 4096 bytes.",
            "remove the data file and its sidecar (the engine recomputes the chunk)",
            "",
        ),
        KV354 => (
            "An LMCache GDS header (a data file's first 4096 bytes, or its sidecar) is not one \
                LMCache writes: the length word is not 4088, the JSON does not parse, the dtype \
                or offsets disagree with the shape, or lmcache_version is not \"1\" (the engine \
                skips such a sidecar at start-up and fails on other errors).",
            "The length word, the JSON's dtype, shape, data_offsets, fmt and lmcache_version.",
            "remove the data file and its sidecar (the engine recomputes the chunk)",
            "",
        ),
    };
    Explanation {
        code,
        severity: code.severity(),
        meaning,
        checked,
        action,
        live,
    }
}

/// The safe next step for a code (used in group headers).
pub fn action(code: Code) -> &'static str {
    explain(code).action
}

/// The text `kvcr explain CODE` prints.
pub fn render(code: Code) -> String {
    let e = explain(code);
    let mut s = format!(
        "{} {} ({})\n\n  meaning: {}\n  checked: {}\n  action:  {}\n",
        e.code,
        e.code.name(),
        match e.severity {
            Severity::Reject => "rejects",
            Severity::Notice => "notice only",
        },
        e.meaning,
        e.checked,
        e.action
    );
    if !e.live.is_empty() {
        s.push_str(&format!("  live:    {}\n", e.live));
    }
    s
}

/// The one-line-per-code list for `kvcr explain` with no argument: the
/// inventory's codes, then the GMS reader's (`kvcr gms`).
pub fn render_list() -> String {
    use crate::format::finding::Family;
    let width = Code::ALL.iter().map(|c| c.name().len()).max().unwrap_or(0);
    let mut s = String::new();
    let mut family = Family::Inventory;
    for c in Code::ALL {
        if c.family() != family {
            family = c.family();
            s.push_str(match family {
                Family::Offload => "\nOffload tiers (kvcr offload, docs/format.md §15):\n",
                _ => "\nGMS artifacts (kvcr gms, docs/format.md §14):\n",
            });
        }
        let e = explain(c);
        let first = e.meaning.split(". ").next().unwrap_or(e.meaning);
        s.push_str(&format!(
            "{}  {:<width$} {}\n",
            c,
            c.name(),
            first.trim_end_matches('.')
        ));
    }
    s.push_str("\nRun `kvcr explain CODE` for what kvcr checked and the safe next step.\n");
    s
}
