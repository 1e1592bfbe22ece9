//! Node facts from procfs and the kernel: boot id, hostname, and a process's
//! start time. Pure parsers are separate from the reads so they can be tested
//! on sample text.

use super::Fact;
use crate::io::procfs::ProcFs;
use rustix::io::Errno;
use uuid::Uuid;

#[cfg(test)]
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The boot id file, relative to the procfs root.
const BOOT_ID_REL: &str = "sys/kernel/random/boot_id";

/// What `/proc/<pid>/stat` says about a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Field 3: R, S, D, Z, X, ...
    pub state: char,
    /// Field 9: the kernel's task flags (PF_EXITING is 0x4; the GMS
    /// reader's fence, `crate::gms::read::process_state`, reads them).
    pub flags: u64,
    /// Field 22: start time in clock ticks after boot.
    pub start_ticks: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) sits between the
/// first `(` and the LAST `)` and may hold spaces, parentheses and any byte,
/// so everything is read after the last `)`: there, field 3 is index 0,
/// field 9 (flags) index 6 and field 22 (starttime) index 19. The one
/// parser of a process's or a task's stat (`/proc/<pid>/task/<tid>/stat`
/// has the same fields).
pub fn parse_stat(stat: &[u8]) -> Option<Stat> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let state = {
        let s = fields.first()?;
        let mut c = s.chars();
        let first = c.next()?;
        if c.next().is_some() {
            return None;
        }
        first
    };
    let flags = fields.get(6)?.parse::<u64>().ok()?;
    let start_ticks = fields.get(19)?.parse::<u64>().ok()?;
    Some(Stat {
        state,
        flags,
        start_ticks,
    })
}

/// Parses the boot id file: one UUID and a newline.
pub fn parse_boot_id(text: &str) -> Option<Uuid> {
    Uuid::parse_str(text.trim()).ok()
}

/// This boot's id, from `/proc/sys/kernel/random/boot_id`.
pub fn boot_id() -> Fact<Uuid> {
    boot_id_in(ProcFs::system())
}

/// This boot's id, read through `proc`.
pub fn boot_id_in(proc: &ProcFs) -> Fact<Uuid> {
    let path = proc.display(BOOT_ID_REL);
    match proc.read(BOOT_ID_REL) {
        Ok(t) => match std::str::from_utf8(&t).ok().and_then(parse_boot_id) {
            Some(u) => Fact::Known(u),
            None => Fact::NotChecked(format!("{path} holds no UUID")),
        },
        Err(Ok(e)) => Fact::NotChecked(format!("cannot read {path}: {e}")),
        Err(Err(why)) => Fact::NotChecked(why),
    }
}

/// This node's name as uname(2) gives it (the UTS namespace's nodename, the
/// same as `/proc/sys/kernel/hostname` and `hostname`).
pub fn hostname() -> Fact<String> {
    let u = rustix::system::uname();
    match u.nodename().to_str() {
        Ok("") => Fact::NotChecked("uname returned an empty nodename".into()),
        Ok(s) => Fact::Known(s.to_string()),
        Err(_) => Fact::NotChecked("this node's hostname is not UTF-8".into()),
    }
}

/// The start time of a running process: `Known(Some(ticks))` when it runs,
/// `Known(None)` when there is no such process (or only its zombie is left:
/// an exited owner has already released its memory), `NotChecked` when the
/// kernel would not tell.
pub fn start_ticks(pid: i32) -> Fact<Option<u64>> {
    start_ticks_in(ProcFs::system(), pid)
}

/// [`start_ticks`] read through `proc`. Where `proc` is not trusted, a
/// process the kernel says does not exist (a null signal: ESRCH) is still
/// known to be gone; any other is not checked.
pub fn start_ticks_in(proc: &ProcFs, pid: i32) -> Fact<Option<u64>> {
    if pid < 1 {
        // Not a process id at all: nothing can run under it.
        return Fact::Known(None);
    }
    let Some(rpid) = rustix::process::Pid::from_raw(pid) else {
        return Fact::Known(None);
    };
    let rel = format!("{pid}/stat");
    let path = proc.display(&rel);
    // Asks the kernel directly with a null signal, which sends nothing.
    let by_signal = |why: String| match rustix::process::test_kill_process(rpid) {
        Err(Errno::SRCH) => Fact::Known(None),
        Ok(()) | Err(Errno::PERM) => Fact::NotChecked(why),
        Err(e) => Fact::NotChecked(format!("{why}, and kill(0) failed: {e}")),
    };
    match proc.read(&rel) {
        Ok(bytes) => match parse_stat(&bytes) {
            Some(s) if matches!(s.state, 'Z' | 'X' | 'x') => Fact::Known(None),
            Some(s) => Fact::Known(Some(s.start_ticks)),
            None if bytes.is_empty() => Fact::Known(None), // exited while being read
            None => Fact::NotChecked(format!("cannot parse {path}")),
        },
        Err(Ok(Errno::SRCH)) => Fact::Known(None),
        // No /proc entry. Either the process does not exist, or /proc
        // hides it (mounted with hidepid=): ask the kernel.
        Err(Ok(Errno::NOENT)) => by_signal(format!(
            "process {pid} exists but {path} is not visible (procfs hidepid or no /proc)"
        )),
        Err(Ok(e)) => Fact::NotChecked(format!("cannot read {path}: {e}")),
        Err(Err(why)) => by_signal(format!("process {pid} runs, but {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(comm: &str, state: char, start: u64) -> Vec<u8> {
        // 52 fields as in Linux 5.x+; field 22 is `start`.
        let mut s = format!(
            "4242 ({comm}) {state} 1 4242 4242 0 -1 4194560 1234 0 0 0 12 3 0 0 20 0 8 0 \
             {start} 123456789 1000"
        );
        for _ in 25..=52 {
            s.push_str(" 0");
        }
        s.push('\n');
        s.into_bytes()
    }

    #[test]
    fn field_22_after_last_paren() {
        let s = parse_stat(&stat_line("sleep", 'S', 123456)).unwrap();
        assert_eq!(
            s,
            Stat {
                state: 'S',
                flags: 4194560,
                start_ticks: 123456
            }
        );
    }

    #[test]
    fn comm_with_spaces_and_parens() {
        for comm in [
            "a b",
            "x) S 1 2 3 (y",
            ") )",
            "((",
            "evil) R 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 777",
        ] {
            let s = parse_stat(&stat_line(comm, 'R', 98765)).unwrap();
            assert_eq!(s.start_ticks, 98765, "comm {comm:?}");
            assert_eq!(s.state, 'R');
        }
    }

    #[test]
    fn comm_with_non_utf8_bytes() {
        let mut b = b"7 (\xff\xfe)".to_vec();
        b.extend_from_slice(&stat_line("x", 'S', 5)[b"4242 (x)".len()..]);
        assert_eq!(parse_stat(&b).unwrap().start_ticks, 5);
    }

    #[test]
    fn real_stat_of_this_process() {
        // Verifies the field index against the kernel: our own start time is
        // the same through /proc/self/stat and /proc/<pid>/stat.
        let pid = std::process::id() as i32;
        let mine = parse_stat(&std::fs::read("/proc/self/stat").unwrap()).unwrap();
        assert_eq!(start_ticks(pid), Fact::Known(Some(mine.start_ticks)));
        // Also compare with the process's start in /proc/self/stat read as
        // plain whitespace fields (no odd characters in a test binary's comm
        // beyond what the last-')' rule handles).
        let text = String::from_utf8_lossy(&std::fs::read("/proc/self/stat").unwrap()).into_owned();
        let after = &text[text.rfind(')').unwrap() + 1..];
        let n: u64 = after.split_whitespace().nth(19).unwrap().parse().unwrap();
        assert_eq!(n, mine.start_ticks);
        // Start time is after boot and before now, in ticks.
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let hz = rustix::param::clock_ticks_per_second() as f64;
        assert!((mine.start_ticks as f64) <= uptime * hz + hz);
    }

    #[test]
    fn truncated_or_garbage() {
        assert_eq!(parse_stat(b""), None);
        assert_eq!(parse_stat(b"1 (x) S 1 2 3"), None);
        assert_eq!(parse_stat(b"no paren at all"), None);
        assert_eq!(parse_stat(b"1 (x)"), None);
        // Field 22 not a number.
        let text = String::from_utf8(stat_line("x", 'S', 777)).unwrap();
        assert_eq!(parse_stat(text.replace(" 777 ", " 7x7 ").as_bytes()), None);
        // State longer than one character.
        assert_eq!(parse_stat(text.replace(" S ", " SS ").as_bytes()), None);
    }

    #[test]
    fn no_such_process_is_known_none() {
        // pid_max is at most 2^22 on Linux; this pid cannot exist.
        assert_eq!(start_ticks(i32::MAX), Fact::Known(None));
        assert_eq!(start_ticks(0), Fact::Known(None));
        assert_eq!(start_ticks(-5), Fact::Known(None));
    }

    #[test]
    fn zombie_counts_as_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Wait until it has exited but is not yet reaped: a zombie.
        for _ in 0..200 {
            let b = std::fs::read(format!("/proc/{pid}/stat")).unwrap_or_default();
            if parse_stat(&b).is_some_and(|s| s.state == 'Z') {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(start_ticks(pid), Fact::Known(None));
        child.wait().unwrap();
        assert_eq!(start_ticks(pid), Fact::Known(None));
    }

    #[test]
    fn boot_id_parses_and_matches_file() {
        assert_eq!(
            parse_boot_id("1464de91-0e70-4493-bebc-119cfbd53ad8\n"),
            Some(Uuid::parse_str("1464de91-0e70-4493-bebc-119cfbd53ad8").unwrap())
        );
        assert_eq!(parse_boot_id("garbage\n"), None);
        if let Ok(t) = std::fs::read_to_string(BOOT_ID_PATH) {
            assert_eq!(boot_id(), Fact::Known(Uuid::parse_str(t.trim()).unwrap()));
        }
    }

    #[test]
    fn hostname_is_uname() {
        if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
            assert_eq!(
                hostname(),
                Fact::Known(h.trim_end_matches('\n').to_string())
            );
        }
    }
}
