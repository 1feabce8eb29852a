//! Debug files fetched by GNU build-id from debuginfod servers, as gdb,
//! perf and elfutils fetch them, with their settings and their cache:
//! `DEBUGINFOD_URLS` (space-separated servers, tried in order),
//! `DEBUGINFOD_CACHE_PATH` (default `$XDG_CACHE_HOME/debuginfod_client`,
//! else `~/.cache/debuginfod_client`), where a file is
//! `BUILDID/debuginfo`, and `DEBUGINFOD_TIMEOUT` (seconds, default 90).
//!
//! Fetches run in parallel after tracing; waiting for them ends at the
//! timeout, whatever the servers do. A cached file is used only if this
//! user owns it and its directory and no one else may write them, since
//! its names end up in the report.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Most bytes one debug file may have: larger ones are not fetched.
const MAX_DOWNLOAD: u64 = 1 << 30;
/// Most fetches at once.
const PARALLEL: usize = 8;
/// elfutils' default for `DEBUGINFOD_TIMEOUT`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(90);

/// The servers and cache, from the environment.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    urls: Vec<String>,
    pub(crate) cache: PathBuf,
    timeout: Duration,
}

impl Config {
    /// From `DEBUGINFOD_*`; `None` when no server is set.
    pub(crate) fn from_env() -> Option<Config> {
        let var = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        Config::from_vars(
            var("DEBUGINFOD_URLS").as_deref(),
            var("DEBUGINFOD_CACHE_PATH").as_deref(),
            var("DEBUGINFOD_TIMEOUT").as_deref(),
            var("XDG_CACHE_HOME").as_deref(),
            var("HOME").as_deref(),
        )
    }

    fn from_vars(
        urls: Option<&str>,
        cache: Option<&str>,
        timeout: Option<&str>,
        xdg_cache: Option<&str>,
        home: Option<&str>,
    ) -> Option<Config> {
        let urls: Vec<String> = urls?
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        if urls.is_empty() {
            return None;
        }
        let cache = match (cache, xdg_cache, home) {
            (Some(c), _, _) => PathBuf::from(c),
            (None, Some(x), _) => Path::new(x).join("debuginfod_client"),
            (None, None, Some(h)) => Path::new(h).join(".cache/debuginfod_client"),
            (None, None, None) => return None,
        };
        let timeout = timeout
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|&t| t > 0)
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        Some(Config {
            urls,
            cache,
            timeout,
        })
    }
}

/// Where build-id `hex`'s debug file is cached, relative to the cache.
pub(crate) fn cached_name(hex: &str) -> String {
    format!("{hex}/debuginfo")
}

/// What fetching found.
#[derive(Debug, Default)]
pub(crate) struct Fetched {
    /// Build-ids (hex) whose debug file is in the cache.
    pub(crate) found: HashSet<String>,
    /// Build-ids no server had.
    pub(crate) missing: usize,
    /// What went wrong otherwise, one line per build-id.
    pub(crate) errors: Vec<String>,
    /// Fetches still running when the timeout ended the wait.
    pub(crate) timed_out: usize,
}

/// Makes sure the debug file of each build-id in `ids` (hex) is in the
/// cache, fetching those that are not, at most [`PARALLEL`] at once.
/// Returns at the timeout, or once `stop` says so; `progress` hears
/// `(done, total)`.
pub(crate) fn fetch(
    config: &Config,
    ids: &[String],
    stop: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(usize, usize),
) -> Fetched {
    let mut out = Fetched::default();
    let mut todo: Vec<String> = Vec::new();
    for hex in ids {
        if usable(&config.cache.join(cached_name(hex))) {
            out.found.insert(hex.clone());
        } else {
            todo.push(hex.clone());
        }
    }
    if todo.is_empty() {
        return out;
    }
    let deadline = Instant::now() + config.timeout;
    let agent = agent(config.timeout);
    let (tx, rx) = mpsc::channel();
    let total = todo.len();
    let mut queue = todo.into_iter();
    let mut running = 0usize;
    let mut done = 0usize;
    // A file whose thread cannot be started (no pid left) is not fetched.
    let mut start_next = |running: &mut usize, errors: &mut Vec<String>| {
        for hex in queue.by_ref() {
            let (tx, agent, config) = (tx.clone(), agent.clone(), config.clone());
            let name = hex.clone();
            let spawned = std::thread::Builder::new()
                .name("debuginfod".into())
                .spawn(move || {
                    let result = fetch_one(&agent, &config, &hex);
                    let _ = tx.send((hex, result));
                });
            match spawned {
                Ok(_) => {
                    *running += 1;
                    return;
                }
                Err(e) => errors.push(format!("{name}: starting a thread: {e}")),
            }
        }
    };
    for _ in 0..PARALLEL {
        start_next(&mut running, &mut out.errors);
    }
    progress(0, total);
    while running > 0 {
        if stop() {
            out.timed_out = running;
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            out.timed_out = running;
            break;
        }
        match rx.recv_timeout(left.min(Duration::from_millis(50))) {
            Ok((hex, result)) => {
                running -= 1;
                done += 1;
                progress(done, total);
                match result {
                    Ok(true) => {
                        out.found.insert(hex);
                    }
                    Ok(false) => out.missing += 1,
                    Err(e) => out.errors.push(format!("{hex}: {e}")),
                }
                start_next(&mut running, &mut out.errors);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    out
}

/// True when `path` is a non-empty regular file that this user owns and no
/// one else may write, in a directory of the same kind.
fn usable(path: &Path) -> bool {
    let ours = |p: &Path, file: bool| {
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            let me = nix::unistd::geteuid().as_raw();
            let kind = if file {
                m.file_type().is_file() && m.len() > 0
            } else {
                m.file_type().is_dir()
            };
            kind && m.uid() == me && m.permissions().mode() & 0o022 == 0
        })
    };
    ours(path, true) && path.parent().is_some_and(|dir| ours(dir, false))
}

fn agent(timeout: Duration) -> ureq::Agent {
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::PlatformVerifier)
        .build();
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .user_agent(concat!("offwake-perf/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls)
        .build()
        .new_agent()
}

/// Fetches one debug file into the cache from the first server that has
/// it: `Ok(false)` when none has.
fn fetch_one(agent: &ureq::Agent, config: &Config, hex: &str) -> Result<bool, String> {
    let dir = config.cache.join(hex);
    let mut last_error = None;
    for url in &config.urls {
        let response = agent.get(format!("{url}/buildid/{hex}/debuginfo")).call();
        let mut response = match response {
            Ok(r) => r,
            Err(e) => {
                last_error = Some(format!("{url}: {e}"));
                continue;
            }
        };
        match response.status().as_u16() {
            200 => {}
            404 => continue,
            code => {
                last_error = Some(format!("{url}: HTTP {code}"));
                continue;
            }
        }
        create_private_dir(&config.cache, true)
            .map_err(|e| format!("{}: {e}", config.cache.display()))?;
        create_private_dir(&dir, false).map_err(|e| format!("{}: {e}", dir.display()))?;
        let body = response.body_mut().as_reader();
        return store(body, &dir).map(|()| true);
    }
    match last_error {
        Some(e) => Err(e),
        None => Ok(false),
    }
}

/// Creates `dir` (mode 0700 when new), with its parents when `parents`.
fn create_private_dir(dir: &Path, parents: bool) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let created = std::fs::DirBuilder::new()
        .recursive(parents)
        .mode(0o700)
        .create(dir);
    match created {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Writes `body` to `dir/debuginfo` through a temporary file renamed at the
/// end, so that no tool ever reads half a file.
fn store(body: impl Read, dir: &Path) -> Result<(), String> {
    let tmp = dir.join(format!(".debuginfo.{}.tmp", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let copied = std::io::copy(&mut body.take(MAX_DOWNLOAD + 1), &mut file)?;
        if copied > MAX_DOWNLOAD {
            return Err(std::io::Error::other(format!(
                "larger than {} MiB",
                MAX_DOWNLOAD >> 20
            )));
        }
        file.flush()?;
        std::fs::rename(&tmp, dir.join("debuginfo"))
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e.to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_follow_elfutils() {
        let c = Config::from_vars(
            Some(" https://a.example/ http://b:8002 "),
            None,
            Some("7"),
            None,
            Some("/root"),
        )
        .unwrap();
        assert_eq!(c.urls, ["https://a.example", "http://b:8002"]);
        assert_eq!(c.cache, Path::new("/root/.cache/debuginfod_client"));
        assert_eq!(c.timeout, Duration::from_secs(7));
        let c = Config::from_vars(Some("x"), None, Some("soon"), Some("/xdg"), Some("/h")).unwrap();
        assert_eq!(c.cache, Path::new("/xdg/debuginfod_client"));
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        let c = Config::from_vars(Some("x"), Some("/c"), None, Some("/xdg"), None).unwrap();
        assert_eq!(c.cache, Path::new("/c"));
        assert!(Config::from_vars(Some("  "), None, None, None, Some("/h")).is_none());
        assert!(Config::from_vars(None, None, None, None, Some("/h")).is_none());
    }

    #[test]
    fn a_dead_server_costs_at_most_the_timeout() {
        // A listener that accepts and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cache = std::env::temp_dir().join(format!("offwake-dbgd-{}", std::process::id()));
        let config = Config {
            urls: vec![format!("http://127.0.0.1:{port}")],
            cache: cache.clone(),
            timeout: Duration::from_secs(1),
        };
        let ids: Vec<String> = (0..20).map(|i| format!("{i:040x}")).collect();
        let started = Instant::now();
        let got = fetch(&config, &ids, &|| false, &mut |_, _| {});
        let took = started.elapsed();
        assert!(got.found.is_empty());
        assert!(took < Duration::from_secs(3), "took {took:?}");
        drop(listener);
        let _ = std::fs::remove_dir_all(&cache);
    }

    #[test]
    fn a_cached_file_others_may_write_is_not_used() {
        let dir = std::env::temp_dir().join(format!("offwake-dbgc-{}", std::process::id()));
        let sub = dir.join("ab");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = sub.join("debuginfo");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(usable(&file));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(!usable(&file), "world-writable file");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!usable(&file), "world-writable directory");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
