//! SIGINT and SIGTERM while the node probe's first driver calls are slow
//! (`cuInit`, the UUID query): the handlers are installed before the probe,
//! so trial and hold both end with kvcr's handled exit 130 and a JSON
//! report, having acquired nothing, and no ready file. A reordering that
//! installed the handlers after the probe would die of the signal instead.

use crate::import::fakecuda::{alloc, built, finish, Scenario};
use crate::util::{signal, wait_for};

#[test]
fn a_signal_during_a_slow_probe_is_exit_130_with_a_report() {
    let Some(b) = built() else { return };
    let s = Scenario::new(b, 1, 1, |_| vec![alloc("fabric", 0)]);
    let inv = s.inv();
    let cases = [
        ("cuInit", libc::SIGINT, false),
        ("cuInit", libc::SIGTERM, true),
        ("cuDeviceGetUuid_v2", libc::SIGTERM, false),
        ("cuDeviceGetUuid_v2", libc::SIGINT, true),
    ];
    std::thread::scope(|sc| {
        for (n, (sym, sig, hold)) in cases.into_iter().enumerate() {
            let (s, inv) = (&s, &inv);
            sc.spawn(move || {
                let log = s.dir.path().join(format!("probe-sig{n}.log"));
                let ready = s.dir.path().join(format!("ready-{n}.json"));
                let mut args = vec!["import", inv.to_str().unwrap(), "--format", "json"];
                if hold {
                    args.extend(["--hold", "--ready-file", ready.to_str().unwrap()]);
                }
                let child = s
                    .command(&log, &[("FAKECUDA_DELAY", format!("{sym}:1:1500"))], &args)
                    .spawn()
                    .unwrap();
                wait_for("the delayed probe call", || {
                    std::fs::read_to_string(&log)
                        .unwrap_or_default()
                        .contains(&format!("delay\t{sym}\t"))
                });
                signal(&child, sig);
                let r = finish(child, &log);
                let ctx = format!("{sym} sig {sig} hold {hold}: {}", r.why());
                assert_eq!(r.code, 130, "{ctx}");
                assert_eq!(r.report()["result"], "interrupted", "{ctx}");
                assert_eq!(r.report()["exit_status"], 130, "{ctx}");
                assert!(r.log.acquired.is_empty(), "{ctx}");
                assert!(r.log.exited, "{ctx}");
                assert!(!ready.exists(), "{ctx}");
            });
        }
    });
}
