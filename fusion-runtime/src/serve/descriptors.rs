//! The process's file-descriptor limit, read when an HTTP server starts (issue 24): the soft
//! limit is raised to the hard one (as servers commonly do), and the connection cap is kept
//! below it with headroom, so that connections past the cap are refused at once with a `503`
//! rather than the accept loop running out of descriptors and leaving every new caller,
//! legitimate or not, to time out.

/// Descriptors kept for what is not a served connection, besides the refusals in flight: the
/// listener, stdio, the runtime's own, a store's files and pool, upstream sockets, logs.
const RESERVED: u64 = 64;

/// The connection cap for a process that may open `files` descriptors at once: `requested`,
/// or less so that `refusals` refused connections lingering and [`RESERVED`] plus an eighth
/// of `files` (a store that grows its pool, upstreams) still fit. At least one.
pub(super) fn cap_for(requested: usize, files: u64, refusals: usize) -> usize {
    let headroom = RESERVED + refusals as u64 + files / 8;
    let fits = usize::try_from(files.saturating_sub(headroom)).unwrap_or(usize::MAX);
    requested.min(fits).max(1)
}

/// How many files this process may open, after raising its soft limit to the hard one;
/// `None` where that cannot be read (no such limit, or not a Unix).
pub(super) fn open_files_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        let soft = limit.current?;
        if let Some(hard) = limit.maximum
            && hard > soft
        {
            let raised = rustix::process::Rlimit {
                current: Some(hard),
                maximum: Some(hard),
            };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => return Some(hard),
                Err(error) => {
                    tracing::debug!(%error, soft, hard, "could not raise the open-files limit");
                }
            }
        }
        Some(soft)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_stays_below_the_limit_with_headroom() {
        // 256 files: 64 reserved, 64 refusals, 32 for growth.
        assert_eq!(cap_for(512, 256, 64), 96);
        // A high limit leaves the requested cap alone.
        assert_eq!(cap_for(512, 20_000, 64), 512);
        // Never zero.
        assert_eq!(cap_for(512, 100, 64), 1);
    }

    #[test]
    fn the_limit_is_read_and_is_at_least_the_soft_one() {
        let limit = open_files_limit();
        if cfg!(unix) {
            assert!(limit.is_some_and(|files| files >= 16), "{limit:?}");
        }
    }
}
