//! The engine-id rule lives in one place (`descriptor::EngineId`): the
//! descriptor reader and `--engine` accept and refuse the same strings.

use kvcr_audit::descriptor::EngineId;

#[test]
fn the_rule_accepts_and_refuses_at_its_edges() {
    let ok = [
        "e".to_string(),
        "vllm:llama-70b/prod-1".to_string(),
        "A.Z_a-z:0/9".to_string(),
        "x".repeat(128),
    ];
    for s in &ok {
        assert_eq!(
            EngineId::parse(s).map(EngineId::into_string).as_deref(),
            Ok(s.as_str())
        );
    }
    let bad = [
        String::new(),
        "x".repeat(129),
        "engine id".to_string(),
        "é".to_string(),
        "a\u{0}b".to_string(),
        "a\\b".to_string(),
        "a+b".to_string(),
    ];
    for s in &bad {
        assert!(EngineId::parse(s).is_err(), "{s:?} accepted");
    }
    assert_eq!(EngineId::first_bad("ab cd"), Some((2, ' ')));
    assert_eq!(EngineId::first_bad("aéb"), Some((1, 'é')));
}

#[test]
fn the_flag_refuses_what_the_rule_refuses() {
    let bin = env!("CARGO_BIN_EXE_kvcr");
    let dir = std::env::temp_dir().join(format!("kvcr-engine-id-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (id, accepted) in [("engine id", false), ("é", false), ("ok-1", true)] {
        let out = std::process::Command::new(bin)
            .args(["audit", "--engine", id])
            .arg(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let refused = stderr.contains("an engine_id is 1-128 characters");
        assert_eq!(!refused, accepted, "{id:?}: {stderr}");
        if !accepted {
            assert_eq!(out.status.code(), Some(2), "{id:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
