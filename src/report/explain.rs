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
                uid that is neither root nor the invoking user, so someone else could have \
                planted or edited it; or a directory below the root is another mount (a bind \
                mount, another file system), which kvcr does not enter. In live mode also: a \
                descriptor carrying cuda_ipc or fabric handle bytes is readable by group or \
                others, and those bytes grant access to the GPU memory.",
            "st_mode and st_uid from fstat of every descriptor and lstat of every directory (the \
                root included); a descriptor below an unsafe directory is rejected too. Mounts: \
                each directory's st_dev and statx mount id against the root's, and openat2 \
                RESOLVE_NO_XDEV for every open. Live mode also checks the read bits of \
                descriptors that carry handle bytes.",
            "have the owner rewrite the inventory with mode 0700 directories and 0600 files owned \
                by its own user, then audit again",
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
                error, a duplicate key, data after the document, or nesting deeper than 32.",
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
                after the owner sealed it.",
            "SHA-256 over the canonical form (docs/format.md §3.2) of the descriptor without its \
                digest member.",
            "do not import; have the owner reseal the descriptor, or start with an empty cache",
            "",
        ),
        KV009 => (
            "A staging leftover (.NAME.tmp) of an interrupted write: the owner died between \
                writing and renaming.",
            "The file name only; leftovers are never opened.",
            "a write may be in progress: audit again in a few seconds; a leftover that stays is \
                an interrupted write: once no owner is writing, remove it and audit again",
            "",
        ),
        KV010 => (
            "An unexpected file in the inventory (not rank-N.json, not a staging leftover), or a \
                regular file deeper than 8 levels, which is not read (symlinks, devices and other \
                mounts are rejected at any depth). A notice only.",
            "The file name and depth.",
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
            "check CUDA_VISIBLE_DEVICES and the node's GPUs (nvidia-smi -L); never import onto \
                another GPU",
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
                counted), below min_epoch, older than max_age_s, or (live) the node rebooted \
                since, or the owner process is gone or its PID was reused.",
            "Epochs across incarnations; epoch against min_epoch; created_unix_ms against the \
                clock and max_age_s; in live mode boot_id against /proc/sys/kernel/random/boot_id \
                and owner pid/start_ticks against /proc/<pid>/stat.",
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

/// The one-line-per-code list for `kvcr explain` with no argument.
pub fn render_list() -> String {
    let mut s = String::new();
    for c in Code::ALL {
        let e = explain(c);
        let first = e.meaning.split(". ").next().unwrap_or(e.meaning);
        s.push_str(&format!(
            "{}  {:<18} {}\n",
            c,
            c.name(),
            first.trim_end_matches('.')
        ));
    }
    s.push_str("\nRun `kvcr explain CODE` for what kvcr checked and the safe next step.\n");
    s
}
