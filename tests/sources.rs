//! Where names come from beyond a binary's own symbols: perf maps of JIT
//! code (real node), MiniDebugInfo, debug files fetched from a debuginfod
//! server, and the kernel's symbols kept between runs.

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
    trace_block_js(&["--call-graph", "dwarf,65528"], node_flags, &["10"]).0
}

/// Runs `block.js` with `script_args` under node with `node_flags`,
/// traced with `options`; the folded entries and stderr (node's with the
/// tool's).
fn trace_block_js(
    options: &[&str],
    node_flags: &[&str],
    script_args: &[&str],
) -> (Vec<Folded>, String) {
    let script = fixture("block.js");
    let mut args = vec!["-f"];
    args.extend(options);
    args.extend(["--", "taskset", "-c", "0", "node"]);
    args.extend(node_flags);
    args.push(script.to_str().expect("UTF-8 path"));
    args.extend(script_args);
    // node may write V8 logs into its working directory.
    let cwd = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out = tool()
        .args(&args)
        .current_dir(cwd)
        .output()
        .expect("running offwake-perf");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {}\n{stderr}", out.status);
    let folded = parse_folded(&String::from_utf8(out.stdout).expect("UTF-8 output"));
    (folded, stderr)
}

/// The position of JS function `f` (named from a perf map) in `frames`.
fn js_at(frames: &[String], f: &str) -> Option<usize> {
    frames
        .iter()
        .position(|n| n.starts_with("JS:") && n.contains(&format!("{f} ")))
}

/// Under the default call graph, whose 8 KiB copy ends inside node's
/// `uv__io_poll` frame (12 KiB of epoll events), a JS function's waits
/// still carry its JS frames: the stack past the copy is read from the
/// waiting thread. Three waits of 300 ms: at least 90% of the children's
/// sleeps is under both JS frames, in call order, and no more than the
/// time node measured the calls to take (which adds each child's start,
/// on the CPU and longer on a loaded machine).
#[test]
fn a_js_wait_carries_its_js_frames_under_the_default_copy() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let since = SystemTime::now();
    let (entries, stderr) = trace_block_js(
        &["--call-graph", "dwarf"],
        &["--perf-basic-prof", "--interpreted-frames-native-stack"],
        &["3", "0.3"],
    );
    remove_perf_maps_since(since);
    let measured = ground_truth(&stderr);
    let framed: u64 = entries
        .iter()
        .filter(|e| e.target_comm == "node" && has(&e.target, "uv_run"))
        .filter(|e| {
            let outer = js_at(&e.target, "outerCaller");
            let inner = js_at(&e.target, "blockOnChild");
            outer.zip(inner).is_some_and(|(o, i)| o < i)
        })
        .map(|e| e.total)
        .sum();
    let slept = 3 * 300_000;
    assert!(
        framed * 10 >= slept * 9 && framed <= measured,
        "{framed} us of the children's {slept} us of sleep (node measured \
         {measured} us in execFileSync) carry its JS frames:\n{entries:#?}\n{stderr}"
    );
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
    let blocked: Vec<&Folded> = with_map
        .iter()
        .filter(|e| e.target_comm == "node" && js_at(&e.target, "blockOnChild").is_some())
        .collect();
    assert!(
        !blocked.is_empty(),
        "no stack through blockOnChild: {with_map:#?}"
    );
    for e in &blocked {
        let outer = js_at(&e.target, "outerCaller").expect("outerCaller under blockOnChild");
        let inner = js_at(&e.target, "blockOnChild").expect("blockOnChild");
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
            .all(|e| js_at(&e.target, "blockOnChild").is_none()),
        "JS names without --perf-basic-prof"
    );
    assert!(
        without.iter().any(|e| e.target_comm == "node"
            && has(&e.target, "uv_run")
            && has(&e.target, "[unknown]")),
        "JIT frames print as [unknown] without a perf map"
    );
}

/// Copies workload `name` to `dir`, stripped, and writes its debug file
/// (`objcopy --only-keep-debug`) to `dir/serve/`; the stripped copy.
fn stripped_with_debug_file(name: &str, dir: &Path) -> PathBuf {
    let built = workload(name);
    let serve = dir.join("serve");
    std::fs::create_dir_all(&serve).expect("creating the served directory");
    let debug = serve.join(format!("{name}.debug"));
    let stripped = dir.join(format!("{name}.stripped"));
    for (tool, args) in [
        (
            "objcopy",
            vec!["--only-keep-debug".into(), built.clone(), debug],
        ),
        ("strip", vec!["-o".into(), stripped.clone(), built]),
    ] {
        let status = std::process::Command::new(tool)
            .args(&args)
            .status()
            .unwrap_or_else(|e| panic!("running {tool}: {e}"));
        assert!(status.success(), "{tool} {args:?}");
    }
    stripped
}

/// The GNU build-id of `path`, in hex (from `readelf -n`).
fn build_id(path: &Path) -> String {
    let out = std::process::Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .expect("running readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build-id in {}", path.display()))
        .to_string()
}

/// An empty scratch directory `name` under the target's temporary one.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the test directory");
    dir
}

/// A pipewake run (3 pokes of 20 ms, pinned to CPU 0) of binary `bin`,
/// traced with `-f` and the environment `env` (`None` removes a
/// variable): the folded entries, the microseconds of the reader's blocks
/// named in its own functions with the writer's poke as waker, and stderr.
fn trace_pipewake(
    bin: &Path,
    env: &[(&str, Option<&std::ffi::OsStr>)],
) -> (Vec<Folded>, u64, String) {
    let mut cmd = tool();
    cmd.args(["-f", "--", "taskset", "-c", "0"])
        .arg(bin)
        .args(["3", "20"]);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().expect("running offwake-perf");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{env:?}: {}\n{stderr}", out.status);
    let entries = parse_folded(&String::from_utf8(out.stdout).expect("UTF-8 output"));
    let blocked = entries
        .iter()
        .filter(|e| has(&e.target, "reader_wait") && has(&e.target, "reader_main"))
        .filter(|e| e.waker.iter().any(|f| f == "writer_poke"))
        .map(|e| e.total)
        .sum();
    (entries, blocked, stderr)
}

/// The HTTP status of GET `path` on 127.0.0.1:`port`.
fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// elfutils' debuginfod serving the files of `dir` on a loopback port,
/// stopped when dropped.
struct Server {
    child: std::process::Child,
    port: u16,
}

impl Server {
    /// Starts it, and waits until it serves build-id `id`.
    fn start(dir: &Path, id: &str) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("finding a free port")
            .port();
        let child = std::process::Command::new("debuginfod")
            .arg("-F")
            .arg(dir)
            .args(["-p", &port.to_string(), "-d"])
            .arg(dir.join("index.sqlite"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting debuginfod (Debian package debuginfod)");
        let server = Server { child, port };
        let path = format!("/buildid/{id}/debuginfo");
        wait_for("debuginfod to serve the debug file", || {
            http_status(port, &path) == Some(200)
        });
        server
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn debug_files_come_from_a_debuginfod_server() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let dir = fresh_dir("debuginfod-test");
    let stripped = stripped_with_debug_file("pipewake", &dir);
    let id = build_id(&stripped);
    let server = Server::start(&dir.join("serve"), &id);
    let cache = dir.join("cache");

    // Without a server: the stripped binary's own functions are unknown.
    let (plain, blocked, _) = trace_pipewake(&stripped, &[("DEBUGINFOD_URLS", None)]);
    assert_eq!(blocked, 0, "names without debuginfod");
    assert!(
        plain
            .iter()
            .any(|e| e.target_comm == "pipewake.stripp" && has(&e.target, "[unknown]")),
        "no [unknown] frame of the stripped binary: {plain:#?}"
    );

    // With it: fetched into the cache, named, with the wakeups' time.
    let url = server.url();
    let env = [
        ("DEBUGINFOD_URLS", Some(url.as_ref())),
        ("DEBUGINFOD_CACHE_PATH", Some(cache.as_os_str())),
    ];
    let (_, blocked, stderr) = trace_pipewake(&stripped, &env);
    assert_slept("reader blocked until poked", blocked, 3, 20, &stderr);
    let cached = cache.join(&id).join("debuginfo");
    assert!(cached.is_file(), "{} not cached", cached.display());

    // The cache is enough once filled: the server is gone.
    drop(server);
    let (_, blocked, stderr) = trace_pipewake(&stripped, &env);
    assert_slept("from the cache", blocked, 3, 20, &stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A one-file HTTPS server (Python's `http.server` over TLS) serving
/// `root` on a loopback port with certificate `cert` and key `key`,
/// stopped when dropped.
struct TlsServer {
    child: std::process::Child,
    port: u16,
}

impl TlsServer {
    fn start(root: &Path, cert: &Path, key: &Path) -> TlsServer {
        use std::io::BufRead;
        let script = "import functools, http.server, ssl, sys\n\
            handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n\
            httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)\n\
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
            ctx.load_cert_chain(sys.argv[2], sys.argv[3])\n\
            httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)\n\
            print(httpd.server_address[1], flush=True)\n\
            httpd.serve_forever()\n";
        let mut child = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(root)
            .arg(cert)
            .arg(key)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting python3's HTTPS server");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("its stdout");
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading its port");
        let port = line.trim().parse().expect("a port number");
        TlsServer { child, port }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Makes a CA and a certificate it signs for `localhost`, in `dir`:
/// (CA certificate, server certificate, server key).
fn make_certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let f = |n: &str| dir.join(n);
    let openssl = |args: &[&str]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("running openssl");
        assert!(status.success(), "openssl {args:?}");
    };
    std::fs::write(
        f("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .expect("writing ext.cnf");
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=offwake test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    (f("ca.pem"), f("server.pem"), f("server.key"))
}

#[test]
fn debug_files_come_over_https_with_the_certificate_checked() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let dir = fresh_dir("debuginfod-https");
    let stripped = stripped_with_debug_file("pipewake", &dir);
    let id = build_id(&stripped);
    // The layout a debuginfod server answers with.
    let served = dir.join("https");
    std::fs::create_dir_all(served.join("buildid").join(&id)).expect("creating the tree");
    std::fs::copy(
        dir.join("serve/pipewake.debug"),
        served.join("buildid").join(&id).join("debuginfo"),
    )
    .expect("placing the debug file");
    let (ca, cert, key) = make_certificates(&dir);
    let server = TlsServer::start(&served, &cert, &key);
    let url = format!("https://localhost:{}", server.port);

    // Only the test's CA, or only the system's.
    let trace = |ca: Option<&Path>, cache: &str| {
        let cache = dir.join(cache);
        let env = [
            ("DEBUGINFOD_URLS", Some(url.as_ref())),
            ("DEBUGINFOD_CACHE_PATH", Some(cache.as_os_str())),
            ("DEBUGINFOD_TIMEOUT", Some("20".as_ref())),
            ("SSL_CERT_FILE", ca.map(Path::as_os_str)),
            ("SSL_CERT_DIR", ca.map(|_| dir.as_os_str())),
        ];
        let (_, blocked, stderr) = trace_pipewake(&stripped, &env);
        (blocked > 0, stderr)
    };
    let (named, stderr) = trace(None, "cache-untrusted");
    assert!(
        !named,
        "names from a server whose certificate no CA vouches for"
    );
    assert!(
        stderr.contains("could not be fetched from debuginfod"),
        "no NOTE on the refused certificate: {stderr}"
    );
    let (named, stderr) = trace(Some(&ca), "cache-trusted");
    assert!(named, "no names over HTTPS with the CA trusted: {stderr}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mini_debuginfo_names_a_stripped_binary() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let dir = fresh_dir("minidebuginfo-test");
    let built = workload("pipewake");
    let (plain, mini) = (dir.join("pipewake.plain"), dir.join("pipewake.mini"));
    std::fs::copy(&built, &plain).expect("copying pipewake");
    std::fs::copy(&built, &mini).expect("copying pipewake");
    let status = std::process::Command::new("strip")
        .arg(&plain)
        .status()
        .expect("running strip");
    assert!(status.success());
    // As Fedora's find-debuginfo builds it.
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/symbolize/minidebuginfo.sh");
    let status = std::process::Command::new(&script)
        .arg(&mini)
        .status()
        .expect("running minidebuginfo.sh");
    assert!(status.success());

    let (_, blocked, _) = trace_pipewake(&plain, &[]);
    assert_eq!(
        blocked, 0,
        "names in a stripped binary without MiniDebugInfo"
    );
    let (_, blocked, stderr) = trace_pipewake(&mini, &[]);
    assert_slept(
        "reader blocked, named from MiniDebugInfo",
        blocked,
        3,
        20,
        &stderr,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cold run (no cache) leaves the kernel's symbol tables for the next
/// run, which loads them instead of reading kallsyms: with perf, the
/// events' holder writes them once the run is over; with tracefs, the run
/// does before it exits.
#[test]
fn a_cold_run_leaves_the_kallsyms_cache_to_the_next() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    for backend in ["perf", "tracefs"] {
        // Under /tmp, whose sticky root directory the tool trusts.
        let dir = std::env::temp_dir().join(format!(
            "offwake-kallsyms-cache-{backend}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("creating the cache's directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let env = [
            ("XDG_CACHE_HOME", dir.to_str().expect("a UTF-8 path")),
            ("OFFWAKE_TIMING", "1"),
        ];
        let args = ["--backend", backend, "-f", "--", "true"];
        // A run that succeeds and got kallsyms as `how` says.
        let run = |how: &str| {
            let out = run_env(&env, &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{backend}: {stderr}");
            assert!(
                stderr.contains(&format!("kallsyms (ms after launch): {how}")),
                "{backend}: {stderr}"
            );
        };
        run("read");
        let file = dir.join("offwake-perf/kallsyms");
        wait_for("the kallsyms cache", || file.exists());
        run("cached");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
