//! Pins every constant of `kvcr pools` to its value in the KVCR 0.1.1 wheel
//! (the line is named beside each), and checks the decoders against the
//! vectors KVCR 0.1.1's own encoder produced (docs/format.md §16: the payload
//! vectors by `_RECOVERY_ENCODER`, the digest terms by `canonical_pool_terms`).

use super::codes::{self, Code, TABLE};
use super::format::*;
use super::rules::{self, Options};
use crate::format::finding::Severity;

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn constants_are_kvcr_0_1_1s() {
    // kvcr/memory.py:20 `_POOL_PREFIX = "kvcr"`, joined with "-" at :302-305.
    assert_eq!(POOL_PREFIX, "kvcr-");
    // kvcr/memory.py:19 `_POOL_MODE = 0o600`.
    assert_eq!(POOL_MODE, 0o600);
    // kvcr/memory.py:29 `_JOURNAL_HEADER_BYTES = 4096`.
    assert_eq!(JOURNAL_HEADER_BYTES, 4096);
    // kvcr/kvcr_service.py:60 `_DEFAULT_JOURNAL_BYTES = 100 * (1 << 20)`.
    assert_eq!(DEFAULT_JOURNAL_BYTES, 104_857_600);
    // kvcr/recovery_journal.py:63 `_INVALID_OFFSET, _PUBLISHED_OFFSET, _CONSUMED_OFFSET = 0, 128, 192`.
    assert_eq!(
        (INVALID_OFFSET, PUBLISHED_OFFSET, CONSUMED_OFFSET),
        (0, 128, 192)
    );
    // :65 `_ALIGNMENT = 8`; :69 `struct.Struct("<HHH")`; :72 `_RECORD_BLOCK = 1`.
    assert_eq!((ALIGNMENT, FRAME_HEADER, RECORD_BLOCK), (8, 6, 1));
    // :562 `struct.Struct("<32sQ")`, :563 `b"KVCR-HANDBACK\0"`.
    assert_eq!(HANDBACK_HEADER, 40);
    assert_eq!(HANDBACK_DOMAIN, b"KVCR-HANDBACK\0");
    // kvcr/kvcr_service.py:64 `_GB = 1 << 30`.
    assert_eq!(GIB, 1 << 30);
}

#[test]
fn names_follow_kvcrs_pattern() {
    let g = "0123456789abcdef0123456789abcdef";
    assert_eq!(
        classify_name(format!("kvcr-pool_0-{g}").as_bytes()),
        Name::Pool {
            index: 0,
            generation: g.into()
        }
    );
    assert_eq!(
        classify_name(format!("kvcr-pool_12-{g}").as_bytes()),
        Name::Pool {
            index: 12,
            generation: g.into()
        }
    );
    // A leading zero is no `str(i)`; another id is foreign but purgeable.
    assert!(matches!(
        classify_name(format!("kvcr-pool_01-{g}").as_bytes()),
        Name::ForeignId { .. }
    ));
    assert!(matches!(
        classify_name(format!("kvcr-mine-{g}").as_bytes()),
        Name::ForeignId { .. }
    ));
    // Upper-case or short generations never match the purge pattern.
    assert_eq!(
        classify_name(format!("kvcr-pool_0-{}", g.to_uppercase()).as_bytes()),
        Name::Unmatched
    );
    assert_eq!(classify_name(b"kvcr-pool_0-0123"), Name::Unmatched);
    assert_eq!(
        classify_name(format!("kvcr--{g}").as_bytes()),
        Name::Unmatched
    );
    assert_eq!(classify_name(b"gms-kv-lease-0.shm"), Name::Other);
    // Raw bytes: a non-UTF-8 pool id is still judged by bytes.
    let mut n = b"kvcr-\xff-".to_vec();
    n.extend(g.as_bytes());
    assert!(matches!(classify_name(&n), Name::ForeignId { .. }));
}

#[test]
fn payload_vectors_from_kvcrs_encoder() {
    let r = decode_record(&unhex("93 91 92 a0 00 c0 ff"), None).unwrap();
    assert_eq!(r.g2, Some(vec![(String::new(), 0)]));
    assert_eq!((r.g3, r.position), (None, -1));
    let r = decode_record(&unhex("93 91 92 a0 03 05 07"), None).unwrap();
    assert_eq!(r.g2, Some(vec![(String::new(), 3)]));
    assert_eq!((r.g3, r.position), (Some(5), 7));
    let r = decode_record(&unhex("93 c0 c0 ff"), None).unwrap();
    assert!(r.is_removal());
}

#[test]
fn payloads_are_decoded_as_strictly_as_msgspec() {
    // Shorter arrays take the defaults; extra trailing elements are ignored.
    assert_eq!(decode_record(&unhex("90"), None).unwrap().position, -1);
    let r = decode_record(&unhex("95 c0 01 02 81 a1 78 c3 93 01 02 03"), None).unwrap();
    assert_eq!((r.g3, r.position), (Some(1), 2));
    for (bad, why) in [
        ("93 c0 c0 ff 00", "follow"),     // trailing bytes
        ("93 90 c0 ff", "empty"),         // g2 = []
        ("93 c0 c0 fe", "position"),      // position -2
        ("93 91 92 a0 ff c0 ff", "slot"), // negative slot
        ("93 91 93 a0 00 00 c0 ff", "3 elements"),
        ("93 91 92 c4 00 00 c0 ff", "bin"),
        ("93 c0 ff ff", "g3"), // negative g3
        ("81 a1 61 00", "not an array"),
        ("93 91 92 a1", "truncated"),
        ("c1", "never used"),
    ] {
        let e = decode_record(&unhex(bad), None).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
    // Labels, with the claim's pool names.
    let names = ["kv".to_string()];
    let ok = unhex("93 91 92 a2 6b 76 00 c0 ff");
    assert!(decode_record(&ok, Some(&names)).is_ok());
    let none = unhex("93 91 92 a0 00 c0 ff");
    assert!(decode_record(&none, Some(&names)).is_err());
    // "kv:" and "kv:*" are refused; "kv:a" once per record.
    for l in ["a3 6b 76 3a", "a4 6b 76 3a 2a"] {
        let p = unhex(&format!("93 91 92 {l} 00 c0 ff"));
        assert!(decode_record(&p, Some(&names)).is_err(), "{l}");
    }
    let twice = unhex("93 92 92 a4 6b 76 3a 61 00 92 a4 6b 76 3a 61 01 c0 ff");
    assert!(decode_record(&twice, Some(&names)).is_err());
    // Deep nesting in an ignored element is bounded, not a stack overflow.
    let mut deep = vec![0x94, 0xc0, 0xc0, 0xff];
    deep.extend(std::iter::repeat_n(0x91, 10_000));
    deep.push(0xc0);
    assert!(decode_record(&deep, None).unwrap_err().contains("deep"));
}

#[test]
fn the_45_byte_frame_kvcr_writes() {
    let mut frame = unhex("2d00 0100 2000");
    frame.extend([0x11; 32]);
    frame.extend(unhex("939192a000c0ff"));
    assert_eq!(frame.len(), 45);
    assert_eq!(stored_size(45), 48);
    let h = frame_header(frame[..6].try_into().unwrap());
    assert_eq!(h, (45, 1, 32));
    assert_eq!(check_ring_frame(h, 48, 1 << 20), Ok(48));
    assert_eq!(
        check_ring_frame(h, 40, 1 << 20),
        Err(FrameError::Exceeds {
            stored: 48,
            available: 40
        })
    );
    assert_eq!(
        check_ring_frame((5, 1, 0), 48, 1 << 20),
        Err(FrameError::KeySize {
            frame_size: 5,
            key_size: 0
        })
    );
    assert_eq!(
        check_ring_frame((45, 2, 32), 48, 1 << 20),
        Err(FrameError::UnknownType(2))
    );
    let fr = handback_frames(&frame).unwrap();
    assert_eq!(fr, vec![(6..38, 38..45)]);
    assert!(handback_frames(&frame[..44]).is_err());
    assert!(handback_frames(&frame[..4]).is_err());
}

#[test]
fn digest_terms_vector_of_kvcrs_canonical_pool_terms() {
    let pools = pool_terms(104_857_600, &[106_496], &[(String::new(), 4096)]);
    assert_eq!(pools[0].offset_bytes, 104_857_600);
    let t = terms(&Terms {
        compatibility_digest: "abc",
        generation: generation_bytes("00112233445566778899aabbccddeeff").unwrap(),
        pools: &pools,
        journal_bytes: 104_857_600,
        mapping_bytes: 104_964_096,
        st_dev: 27,
        st_ino: 3886,
    });
    let want = unhex(
        "4b5643522d48414e444241434b00 616263 00 00112233445566778899aabbccddeeff
         9184a46e616d65a0aa73697a655f6279746573ce0001a000b0626c6f636b5f73697a655f6279746573cd1000
         ac6f66667365745f6279746573ce06400000
         0000400600000000 00a0410600000000 1b00000000000000 2e0f000000000000",
    );
    assert_eq!(t.len(), 128);
    assert_eq!(t, want);
    let mut body = unhex("2d00 0100 2000");
    body.extend([0x11; 32]);
    body.extend(unhex("939192a000c0ff"));
    assert_eq!(
        handback_digest(&t, &body).to_vec(),
        unhex("0e5b724d899bbffd180ece62d5be881357ae84071dcb01812aaa462ad0cfa13c")
    );
}

#[test]
fn pool_sizes_gb_as_kvcrs_cli_parses_them() {
    // KVCR's own CLI run: 0.0001 GiB is 106,496 bytes (26 pages).
    assert_eq!(parse_pool_sizes_gb("0.0001", 4096), Ok(vec![106_496]));
    assert_eq!(parse_pool_sizes_gb("64", 4096), Ok(vec![64 << 30]));
    assert_eq!(
        parse_pool_sizes_gb("1,0.5", 4096),
        Ok(vec![1 << 30, 1 << 29])
    );
    for bad in ["0", "-1", "", "abc", "1e3", "0.000000001", "1,,2"] {
        assert!(parse_pool_sizes_gb(bad, 4096).is_err(), "{bad}");
    }
}

#[test]
fn pool_layouts_as_kvcrs_config_checks_them() {
    assert_eq!(parse_pool_layouts(":4096"), Ok(vec![(String::new(), 4096)]));
    assert_eq!(parse_pool_layouts("k:8192,v:8192").unwrap().len(), 2);
    for bad in ["k:0", "k", "k:8,k:8", ":8,v:8", "a:b:8"] {
        assert!(parse_pool_layouts(bad).is_err(), "{bad}");
    }
}

#[test]
fn cursors_as_kvcr_validates_them() {
    let c = DEFAULT_JOURNAL_BYTES - JOURNAL_HEADER_BYTES;
    assert!(cursors_valid(0, 0, c));
    assert!(cursors_valid(c, 0, c));
    assert!(!cursors_valid(c + 8, 0, c));
    assert!(!cursors_valid(8, 16, c));
    assert!(!cursors_valid(4, 0, c));
}

#[test]
fn codes_are_kv4xx_with_unique_names_and_explanations() {
    let mut names = std::collections::BTreeSet::new();
    for s in TABLE {
        assert!((401..=499).contains(&s.code.0), "{}", s.code.0);
        assert!(names.insert(s.name), "duplicate {}", s.name);
        assert_eq!(Code::parse(&s.code.id()), Some(s.code));
        assert_eq!(Code::parse(s.name), Some(s.code));
        let e = codes::explain(s.code);
        assert!(e.contains(s.meaning) && e.contains(s.action));
        // No KV4xx code is one of another command's.
        assert_eq!(crate::format::finding::Code::parse(&s.code.id()), None);
    }
    assert_eq!(codes::KV414.severity(), Severity::Reject);
    assert_eq!(codes::KV420.severity(), Severity::Notice);
}

#[test]
fn slots_are_checked_on_the_final_table() {
    let rec = |g2: Vec<(&str, u64)>, g3| super::format::Record {
        g2: Some(g2.into_iter().map(|(l, s)| (l.to_string(), s)).collect()),
        g3,
        position: -1,
    };
    let o = Options {
        pool_sizes_bytes: Some(vec![106_496]),
        pool_layouts: Some(vec![(String::new(), 4096)]),
        ..Options::default()
    };
    let mut t = rules::Replay::default();
    t.apply(b"a", rec(vec![("", 25)], None));
    assert_eq!(rules::slot_problem(&t, &o), None);
    t.apply(b"b", rec(vec![("", 26)], None));
    assert!(rules::slot_problem(&t, &o).unwrap().contains("26 slots"));
    t.apply(b"b", rec(vec![("", 25)], None));
    assert!(rules::slot_problem(&t, &o).unwrap().contains("twice"));
    // A removal (neither tier) removes the key: last write wins.
    t.apply(
        b"b",
        super::format::Record {
            g2: None,
            g3: None,
            position: -1,
        },
    );
    assert_eq!(rules::slot_problem(&t, &o), None);
    t.apply(b"c", rec(vec![("", 1)], Some(3)));
    assert!(rules::slot_problem(&t, &o).unwrap().contains("no G3"));
    let g3 = Options {
        g3_paths: vec!["/a".into(), "/b".into()],
        capacity_bytes_per_file: Some(4 * 4096),
        ..o.clone()
    };
    assert_eq!(rules::slot_problem(&t, &g3), None);
    t.apply(b"d", rec(vec![("", 2)], Some(8)));
    assert!(rules::slot_problem(&t, &g3).unwrap().contains("hold 8"));
    assert_eq!(t.summary(&g3).g3_files.len(), 2);
}

#[test]
fn proc_net_unix_listeners_and_the_pid_namespace() {
    use super::live::{parse_nspid, parse_unix_listeners};
    // The reference's listening entry of a live service, an accepted
    // connection under the same path (state 03) and a listener elsewhere.
    let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
        0000000027bb1b2a: 00000002 00000000 00010000 0001 01 453577 /run/kvcr/memory.sock\n\
        0000000027bb1b2b: 00000003 00000000 00000000 0001 03 453600 /run/kvcr/memory.sock\n\
        0000000027bb1b2c: 00000002 00000000 00010000 0001 01 12 /run/a b.sock\n\
        0000000027bb1b2d: 00000002 00000000 00000000 0001 01 13\n";
    let l = parse_unix_listeners(text);
    assert_eq!(l.len(), 2, "{l:?}");
    assert_eq!(l[&453_577], "/run/kvcr/memory.sock");
    assert_eq!(l[&12], "/run/a b.sock");
    assert_eq!(parse_nspid(b"Name:\tx\nNSpid:\t16861\n"), Some(1));
    assert_eq!(parse_nspid(b"NSpid:\t900\t12\n"), Some(2));
    assert_eq!(parse_nspid(b"Name:\tx\n"), None);
}
