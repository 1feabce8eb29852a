//! Tests of the map history: parsing maps lines, and fork, exec, mmap
//! and exit events replayed over snapshots; perf maps held and owned.

use super::bound::COMPACT_FIRST;
use super::*;
use crate::event::{Comm, CommChange, Exit, Fork, Mmap};
use crate::sys::open::OpenError;

#[test]
fn a_perf_map_must_be_owned_by_its_process_user() {
    // A process of this root, as its pid in its namespace says.
    let ns_pid = 0x7fff_0001u32;
    let path = format!("/tmp/perf-{ns_pid}.map");
    std::fs::write(&path, "10 10 f\n").unwrap();
    let mut pm = ProcessMaps::new();
    let root = pm.roots.capture(std::process::id());
    let me = nix::unistd::geteuid().as_raw();
    for (euid, ok) in [(me, true), (me.wrapping_add(4242), false)] {
        pm.procs.insert(
            1,
            Process {
                root,
                perf_map: Some((ns_pid, euid)),
                ..Process::default()
            },
        );
        let got = pm.open_perf_map(1);
        if ok {
            assert_eq!(got.map(|o| o.size).ok(), Some(8));
        } else {
            assert_eq!(got.err(), Some(OpenError::NotOwned));
        }
    }
    std::fs::remove_file(&path).unwrap();
    assert_eq!(pm.open_perf_map(1).err(), Some(OpenError::Missing));
    assert_eq!(pm.open_perf_map(2).err(), Some(OpenError::NoRoot));
}

#[test]
fn a_perf_map_is_held_from_its_process_exit() {
    let ns_pid = 0x7fff_0002u32;
    let path = format!("/tmp/perf-{ns_pid}.map");
    std::fs::write(&path, "10 10 before_exit\n").unwrap();
    let mut pm = ProcessMaps::new();
    let root = pm.roots.capture(std::process::id());
    let me = nix::unistd::geteuid().as_raw();
    pm.procs.insert(
        5,
        Process {
            root,
            perf_map: Some((ns_pid, me)),
            ..Process::default()
        },
    );
    // A stack of it was stored (its JIT frames print through the map).
    pm.ensure_covers(5, 0, &[0x12], &[true]);
    pm.observe(&ev(1, EventKind::Exit(Exit { tgid: 5, tid: 5 })));
    // Removed, and the name taken by another file: the held one reads.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, "10 10 someone_else\n").unwrap();
    let wanted = [0x12u64].into_iter().collect();
    for _ in 0..2 {
        let file = pm.open_perf_map(5).expect("held");
        let found = crate::symbolize::perfmap::read(&file, &wanted);
        assert_eq!(found.names[&0x12], "before_exit");
    }
    std::fs::remove_file(&path).unwrap();
}

fn ev(time: u64, kind: EventKind) -> Event {
    Event { time, cpu: 0, kind }
}

fn mmap(tgid: u32, start: u64, len: u64, pgoff: u64, path: &str) -> EventKind {
    EventKind::Mmap(Mmap {
        tgid,
        tid: tgid,
        start,
        len,
        pgoff,
        path: path.to_string(),
        executable: true,
        file: None,
        build_id: None,
    })
}

/// A ProcessMaps where `tgid` is known with an empty history, so tests
/// never read the real /proc for synthetic pids.
fn known(tgids: &[u32]) -> ProcessMaps {
    let mut pm = ProcessMaps::new();
    for &t in tgids {
        pm.procs.insert(t, Process::default());
    }
    pm
}

fn path_at(pm: &ProcessMaps, tgid: u32, time: u64, addr: u64) -> Option<(String, u64)> {
    pm.lookup(tgid, time, addr)
        .map(|(m, off)| (m.path.to_string(), off))
}

#[test]
fn parses_maps_lines() {
    let text = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 1234    /usr/bin/prog
55d0c0a02000-55d0c0a08000 r-xp 00002000 08:01 1234    /usr/bin/prog
7f0000000000-7f0000010000 r-xp 00001000 08:01 99      /opt/my app/lib x.so (deleted)
7f0000100000-7f0000200000 rw-p 00000000 00:00 0
7f0000300000-7f0000301000 r-xp 00000000 00:00 0       [anon:jit]
7ffd1e7fe000-7ffd1e800000 r-xp 00000000 00:00 0       [vdso]
not a maps line
";
    let maps = parse_maps(text, 0);
    assert_eq!(maps.len(), 3);
    assert_eq!(&*maps[0].path, "/usr/bin/prog");
    assert_eq!(
        (maps[0].start, maps[0].end, maps[0].pgoff),
        (0x55d0c0a02000, 0x55d0c0a08000, 0x2000)
    );
    assert_eq!(&*maps[1].path, "/opt/my app/lib x.so");
    assert!(maps[1].deleted && !maps[0].deleted);
    assert_eq!(
        maps[0].file,
        Some(FileKey {
            dev: libc::makedev(8, 1),
            ino: 1234
        })
    );
    assert_eq!(maps[1].file.map(|k| k.ino), Some(99));
    assert_eq!(maps[2].file, None, "inode 0 is no file");
    assert_eq!(maps[1].pgoff, 0x1000);
    assert!(maps[2].is_vdso());
}

#[test]
fn exec_replaces_the_image() {
    let mut pm = known(&[100]);
    pm.observe(&ev(10, mmap(100, 0x1000, 0x1000, 0, "/bin/old")));
    pm.observe(&ev(
        20,
        EventKind::Comm(CommChange {
            tgid: 100,
            tid: 100,
            comm: Comm::from("new"),
            exec: true,
        }),
    ));
    pm.observe(&ev(21, mmap(100, 0x1000, 0x2000, 0x3000, "/bin/new")));
    assert_eq!(
        path_at(&pm, 100, 15, 0x1800),
        Some(("/bin/old".into(), 0x800))
    );
    // Between exec and the new mmap: nothing.
    assert_eq!(path_at(&pm, 100, 20, 0x1800), None);
    assert_eq!(
        path_at(&pm, 100, 30, 0x1800),
        Some(("/bin/new".into(), 0x3800))
    );
    assert_eq!(
        path_at(&pm, 100, 30, 0x2800),
        Some(("/bin/new".into(), 0x4800))
    );
    // Before the first mmap of a process seen only through events.
    assert_eq!(path_at(&pm, 100, 5, 0x1800), None);
}

#[test]
fn later_mmap_supersedes_overlap() {
    let mut pm = known(&[7]);
    pm.observe(&ev(1, mmap(7, 0x10000, 0x10000, 0, "/lib/a.so")));
    pm.observe(&ev(50, mmap(7, 0x14000, 0x1000, 0, "/lib/b.so")));
    assert_eq!(
        path_at(&pm, 7, 40, 0x14100),
        Some(("/lib/a.so".into(), 0x4100))
    );
    assert_eq!(
        path_at(&pm, 7, 60, 0x14100),
        Some(("/lib/b.so".into(), 0x100))
    );
    assert_eq!(
        path_at(&pm, 7, 60, 0x15100),
        Some(("/lib/a.so".into(), 0x5100))
    );
    // Non-executable and anonymous mappings are ignored.
    let mut data = mmap(7, 0x30000, 0x1000, 0, "/lib/data");
    if let EventKind::Mmap(m) = &mut data {
        m.executable = false;
    }
    pm.observe(&ev(70, data));
    pm.observe(&ev(71, mmap(7, 0x40000, 0x1000, 0, "//anon")));
    assert_eq!(path_at(&pm, 7, 80, 0x30000), None);
    assert_eq!(path_at(&pm, 7, 80, 0x40000), None);
}

#[test]
fn fork_copies_parent_and_exit_keeps_history() {
    let mut pm = known(&[1, 2]);
    pm.observe(&ev(1, mmap(1, 0x1000, 0x1000, 0, "/bin/parent")));
    pm.observe(&ev(
        5,
        EventKind::Fork(Fork {
            parent_tgid: 1,
            parent_tid: 1,
            tgid: 3,
            tid: 3,
        }),
    ));
    // Parent maps more after the fork: the child must not see it.
    pm.observe(&ev(6, mmap(1, 0x5000, 0x1000, 0, "/lib/late.so")));
    assert_eq!(
        path_at(&pm, 3, 10, 0x1010),
        Some(("/bin/parent".into(), 0x10))
    );
    assert_eq!(path_at(&pm, 3, 10, 0x5010), None);
    assert_eq!(
        path_at(&pm, 1, 10, 0x5010),
        Some(("/lib/late.so".into(), 0x10))
    );

    // A new thread (same tgid) changes nothing.
    pm.observe(&ev(
        7,
        EventKind::Fork(Fork {
            parent_tgid: 3,
            parent_tid: 3,
            tgid: 3,
            tid: 4,
        }),
    ));
    assert!(!pm.has_exited(3));
    // A thread exiting is not the process exiting.
    pm.observe(&ev(8, EventKind::Exit(Exit { tgid: 3, tid: 4 })));
    assert!(!pm.has_exited(3));
    let m = pm.lookup(3, 10, 0x1010).map(|(m, _)| m.clone()).unwrap();

    // A stack of it was stored: its map stays past its exit.
    pm.ensure_covers(3, 8, &[0x1010], &[true]);
    pm.observe(&ev(9, EventKind::Exit(Exit { tgid: 3, tid: 3 })));
    assert!(pm.has_exited(3));
    assert_eq!(
        path_at(&pm, 3, 100, 0x1010),
        Some(("/bin/parent".into(), 0x10))
    );
    // Never seen alive, so no root, and nothing proves which file was
    // mapped: it is not looked for on the host.
    assert_eq!(pm.open_file(3, &m).err(), Some(OpenError::NoRoot));
}

/// A process none of whose stacks was stored is forgotten at its exit:
/// memory follows the processes alive, not those that came and went.
#[test]
fn a_process_without_a_stored_stack_is_forgotten_at_its_exit() {
    let mut pm = known(&[1]);
    for tgid in 2..1002 {
        pm.observe(&ev(
            u64::from(tgid),
            EventKind::Fork(Fork {
                parent_tgid: 1,
                parent_tid: 1,
                tgid,
                tid: tgid,
            }),
        ));
        pm.observe(&ev(
            u64::from(tgid),
            mmap(tgid, 0x1000, 0x1000, 0, "/bin/short"),
        ));
        if tgid == 500 {
            pm.ensure_covers(tgid, u64::from(tgid), &[0x1010], &[true]);
        }
        pm.observe(&ev(
            u64::from(tgid),
            EventKind::Exit(Exit { tgid, tid: tgid }),
        ));
    }
    assert_eq!(pm.known().len(), 2, "{:?}", pm.known());
    assert!(pm.is_known(500) && pm.has_exited(500));
    assert_eq!(
        path_at(&pm, 500, 600, 0x1010),
        Some(("/bin/short".into(), 0x10))
    );
}

#[test]
fn reused_pid_starts_a_new_history() {
    let mut pm = known(&[1, 2, 9]);
    pm.observe(&ev(1, mmap(1, 0x1000, 0x1000, 0, "/bin/one")));
    pm.observe(&ev(1, mmap(9, 0x1000, 0x1000, 0, "/bin/old9")));
    pm.ensure_covers(9, 1, &[0x1000], &[true]);
    pm.observe(&ev(2, EventKind::Exit(Exit { tgid: 9, tid: 9 })));
    pm.observe(&ev(
        5,
        EventKind::Fork(Fork {
            parent_tgid: 1,
            parent_tid: 1,
            tgid: 9,
            tid: 9,
        }),
    ));
    assert_eq!(path_at(&pm, 9, 3, 0x1000), Some(("/bin/old9".into(), 0)));
    assert_eq!(path_at(&pm, 9, 6, 0x1000), Some(("/bin/one".into(), 0)));
    assert!(!pm.has_exited(9));
}

#[test]
fn an_exec_older_than_the_snapshot_keeps_what_it_shows() {
    let me = std::process::id();
    let f = an_exec_older_than_the_snapshot_keeps_what_it_shows as fn() as usize as u64;
    let exec = |time| {
        ev(
            time,
            EventKind::Comm(CommChange {
                tgid: me,
                tid: me,
                comm: Comm::from("x"),
                exec: true,
            }),
        )
    };
    // Read late: the exec happened before /proc was read.
    let before = crate::sys::host::monotonic_ns();
    let mut pm = ProcessMaps::new();
    pm.ensure_known(me, 0);
    pm.observe(&exec(before));
    assert!(pm.lookup(me, before + 10, f).is_some());
    // An exec after the read replaces the image.
    let mut pm = ProcessMaps::new();
    pm.ensure_known(me, 0);
    let after = crate::sys::host::monotonic_ns() + 1_000_000_000;
    pm.observe(&exec(after));
    assert!(pm.lookup(me, after + 10, f).is_none());
    assert!(pm.lookup(me, after - 10, f).is_some());
}

#[test]
fn snapshot_of_own_process() {
    let mut pm = ProcessMaps::new();
    let me = std::process::id();
    pm.ensure_known(me, 0);
    let f = snapshot_of_own_process as fn() as usize as u64;
    let (m, off) = pm.lookup(me, 12345, f).expect("own code is mapped");
    assert!(m.path.starts_with('/'));
    assert!(off >= m.pgoff);
    // An unreadable pid becomes known and empty.
    pm.ensure_known(u32::MAX - 1, 0);
    assert!(pm.is_known(u32::MAX - 1));
    assert!(pm.lookup(u32::MAX - 1, 0, f).is_none());
}

/// A process that maps one file at a new address again and again (perf
/// records no munmap): its history stays bounded, holds the path once,
/// and the mappings it could not follow are counted in a NOTE.
#[test]
fn a_process_mapping_without_end_keeps_a_bounded_history() {
    // No such process: /proc tells nothing, so nothing is ended by it.
    let tgid = 0x7fff_fff0;
    let mut pm = known(&[tgid]);
    let long = format!("/{}/f", "d".repeat(3800));
    pm.observe(&ev(1, mmap(tgid, 0x1000, 0x1000, 0, "/lib/libc.so")));
    // The libc stack is stored: its mapping is kept.
    pm.ensure_covers(tgid, 2, &[0x1800], &[true]);
    let n = 3 * MAX_MAPPINGS as u64;
    for i in 0..n {
        pm.observe(&ev(
            10 + i,
            mmap(tgid, 0x10_0000 + i * 0x1000, 0x1000, 0, &long),
        ));
    }
    let p = &pm.procs[&tgid];
    assert!(p.mappings.len() <= MAX_MAPPINGS, "{}", p.mappings.len());
    assert_eq!(p.paths.len(), 2, "each path held once");
    let shared = p.mappings.iter().filter(|m| *m.path == *long).count();
    assert_eq!(Arc::strong_count(&p.mappings[1].path), shared + 1);
    assert!(p.unfollowed > 0);
    assert_eq!(
        path_at(&pm, tgid, n, 0x1800),
        Some(("/lib/libc.so".into(), 0x800))
    );
    let note = pm.notes().join("\n");
    assert!(
        note.contains(&format!("PID {tgid} ({})", p.unfollowed)),
        "{note}"
    );
}

/// Mapping at the same address again and again replaces the mapping
/// there: the history is compacted to what is in place and what stored
/// stacks use, and nothing is left unfollowed.
#[test]
fn a_mapping_replaced_in_place_is_dropped_unless_a_stack_uses_it() {
    let tgid = 0x7fff_fff1;
    let mut pm = known(&[tgid]);
    pm.observe(&ev(1, mmap(tgid, 0x10000, 0x1000, 0, "/a")));
    pm.ensure_covers(tgid, 2, &[0x10800], &[true]);
    for i in 0..10 * MAX_MAPPINGS as u64 {
        pm.observe(&ev(10 + i, mmap(tgid, 0x10000, 0x1000, 0, "/b")));
    }
    let p = &pm.procs[&tgid];
    assert!(p.mappings.len() <= COMPACT_FIRST, "{}", p.mappings.len());
    assert_eq!(p.unfollowed, 0);
    assert!(pm.notes().is_empty());
    // The stored stack's mapping is still there for its time.
    assert_eq!(path_at(&pm, tgid, 2, 0x10800), Some(("/a".into(), 0x800)));
    assert_eq!(
        path_at(&pm, tgid, u64::MAX - 1, 0x10800),
        Some(("/b".into(), 0x800))
    );
}

/// A mapping made into the middle of another leaves the other's ends
/// mapped as they were.
#[test]
fn a_mapping_into_another_leaves_its_ends() {
    let mut pm = known(&[7]);
    pm.observe(&ev(1, mmap(7, 0x10000, 0x10000, 0x2000, "/lib/a.so")));
    pm.observe(&ev(50, mmap(7, 0x14000, 0x1000, 0, "/lib/b.so")));
    let spans: Vec<(u64, u64, u64)> = pm
        .mapped_at(7, 60)
        .iter()
        .map(|m| (m.start, m.end, m.pgoff))
        .collect();
    assert_eq!(
        spans,
        [
            (0x10000, 0x14000, 0x2000),
            (0x14000, 0x15000, 0),
            (0x15000, 0x20000, 0x7000)
        ]
    );
    assert_eq!(
        path_at(&pm, 7, 60, 0x15100),
        Some(("/lib/a.so".into(), 0x7100))
    );
}

/// A zombie's map reads empty: it is taken as gone, as a pid that cannot
/// be read is, so that its stacks are noted.
#[test]
fn a_zombie_is_gone() {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("starting true");
    let pid = child.id();
    let zombie = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| Some(s.rsplit_once(')')?.1.trim_start().starts_with('Z')))
            .unwrap_or(false)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !zombie() {
        assert!(std::time::Instant::now() < deadline, "true never exited");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut pm = ProcessMaps::new();
    pm.ensure_known(pid, 0);
    assert!(pm.has_exited(pid));
    assert_eq!(pm.unread(pid, 1), Some(Unread::Untraced));
    child.wait().expect("reaping true");
}

/// The key and path of this test binary, a file that exists.
fn this_file() -> (FileKey, String) {
    let exe = std::env::current_exe().unwrap();
    let meta = std::fs::metadata(&exe).unwrap();
    let key = FileKey {
        dev: meta.dev(),
        ino: meta.ino(),
    };
    (key, exe.to_str().unwrap().to_string())
}

#[test]
fn a_process_whose_stacks_run_in_files_is_forgotten_at_exit() {
    let (key, path) = this_file();
    let mut pm = known(&[7, 8]);
    let root = pm.roots.capture(std::process::id());
    for t in [7, 8] {
        pm.procs.get_mut(&t).unwrap().root = root;
    }
    let mut in_file = mmap(7, 0x1000, 0x1000, 0, &path);
    if let EventKind::Mmap(m) = &mut in_file {
        m.file = Some(key);
    }
    pm.observe(&ev(1, in_file));
    pm.observe(&ev(1, mmap(8, 0x1000, 0x1000, 0, "/bin/eight")));
    // 7's stack is all in a file; 8's has a frame in none.
    pm.ensure_covers(7, 2, &[0x1010], &[false]);
    pm.ensure_covers(8, 2, &[0x1010], &[true]);
    for t in [7, 8] {
        pm.observe(&ev(3, EventKind::Exit(Exit { tgid: t, tid: t })));
    }
    assert!(!pm.is_known(7));
    assert!(pm.is_known(8));
    // 7's file opens without it, checked to be the file mapped.
    let (opened, mapping) = pm.open_code_file(key).expect("registered");
    assert_eq!(opened.map(|o| o.key).ok(), Some(key));
    assert_eq!(&*mapping.path, path);
    let other = FileKey {
        dev: key.dev,
        ino: key.ino.wrapping_add(1),
    };
    assert!(pm.open_code_file(other).is_none());
}

#[test]
fn a_full_registry_of_files_keeps_the_process_map() {
    let mut pm = known(&[7]);
    let mapping = |ino| Mapping {
        file: Some(FileKey { dev: 1, ino }),
        ..Mapping::new(0x1000, 0x2000, 0, "/lib/x.so", 0)
    };
    let mut ino = 1;
    while pm.register_code_file(7, &mapping(ino)) {
        ino += 1;
    }
    assert_eq!(ino as usize, code::MAX_CODE_FILES + 1);
    // Registered files still are; a new one is refused.
    assert!(pm.register_code_file(7, &mapping(1)));
    assert!(!pm.register_code_file(7, &mapping(ino + 1)));
    // Its stack in that new file keeps the process after its exit.
    let mut in_file = mmap(7, 0x1000, 0x1000, 0, "/lib/x.so");
    if let EventKind::Mmap(m) = &mut in_file {
        m.file = Some(FileKey {
            dev: 1,
            ino: ino + 1,
        });
    }
    pm.observe(&ev(1, in_file));
    pm.ensure_covers(7, 2, &[0x1010], &[false]);
    pm.observe(&ev(3, EventKind::Exit(Exit { tgid: 7, tid: 7 })));
    assert!(pm.is_known(7));
}
