//! Where names come from beyond a binary's own symbols: perf maps of JIT
//! code (real node), MiniDebugInfo, and debug files fetched from a
//! debuginfod server.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::common::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sources")
        .join(name)
}

/// Removes the perf maps node wrote since `since` (node leaves them).
fn remove_perf_maps_since(since: SystemTime) {
    let Ok(dir) = std::fs::read_dir("/tmp") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let fresh = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= since);
        if name.starts_with("perf-") && name.ends_with(".map") && fresh {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Runs `block.js` (10 blocks of 50 ms) under node with `node_flags`,
/// traced with DWARF stacks deep enough for V8's; the folded entries.
fn trace_node(node_flags: &[&str]) -> Vec<Folded> {
    let script = fixture("block.js");
    let mut args = vec![
        "-f",
        "--call-graph",
        "dwarf,65528",
        "--",
        "taskset",
        "-c",
        "0",
        "node",
    ];
    args.extend(node_flags);
    args.extend([script.to_str().expect("UTF-8 path"), "10"]);
    let out = run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {}\n{stderr}", out.status);
    parse_folded(&String::from_utf8(out.stdout).expect("UTF-8 output"))
}

#[test]
fn node_jit_frames_are_named_from_its_perf_map() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let since = SystemTime::now();
    let with_map = trace_node(&["--perf-basic-prof", "--interpreted-frames-native-stack"]);
    let without = trace_node(&[]);
    remove_perf_maps_since(since);

    // The main thread's blocks in execFileSync: JS frames named from the
    // perf map, between node's own native frames, in call order.
    let js = |frames: &[String], f: &str| {
        frames
            .iter()
            .position(|n| n.starts_with("JS:") && n.contains(&format!("{f} ")))
    };
    let blocked: Vec<&Folded> = with_map
        .iter()
        .filter(|e| e.target_comm == "node" && js(&e.target, "blockOnChild").is_some())
        .collect();
    assert!(
        !blocked.is_empty(),
        "no stack through blockOnChild: {with_map:#?}"
    );
    for e in &blocked {
        let outer = js(&e.target, "outerCaller").expect("outerCaller under blockOnChild");
        let inner = js(&e.target, "blockOnChild").expect("blockOnChild");
        assert!(outer < inner, "outermost first: {:?}", e.target);
        assert!(has(&e.target, "node::Start(int, char**)"), "{:?}", e.target);
    }
    let in_uv_run: u64 = blocked
        .iter()
        .filter(|e| has(&e.target, "uv_run"))
        .map(|e| e.total)
        .sum();
    assert_slept(
        "node's blocks in uv_run under blockOnChild",
        in_uv_run,
        10,
        50,
        "",
    );

    // Without a perf map, the same code is unnamed.
    assert!(
        without
            .iter()
            .all(|e| js(&e.target, "blockOnChild").is_none()),
        "JS names without --perf-basic-prof"
    );
    assert!(
        without.iter().any(|e| e.target_comm == "node"
            && has(&e.target, "uv_run")
            && has(&e.target, "[unknown]")),
        "JIT frames print as [unknown] without a perf map"
    );
}
