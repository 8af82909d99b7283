//! The thread pools commands compress, check and extract on.

/// The stack of each pool thread: the scan recurses once a directory
/// level, and 2 MiB (Rust's default) held 3,000 levels but not 5,000 in a
/// release build; 64 MiB gives 32 times the room. Only the pages a
/// thread touches take memory.
const WORKER_STACK: usize = 64 << 20;

/// A thread pool builder with [`WORKER_STACK`]-sized stacks.
fn pool_builder() -> rayon::ThreadPoolBuilder {
    rayon::ThreadPoolBuilder::new().stack_size(WORKER_STACK)
}

/// Builds rayon's global pool with [`pool_builder`]'s stacks. A process
/// that forks must call this after the fork, never before: its workers
/// start at once, and a child forked while one of them held a lock (such
/// as crossbeam-epoch's half-made global collector) inherits that lock
/// held forever, so its own pool threads hang at their first job.
pub fn build_global_pool() {
    // Fails only when the pool exists already, which is then kept.
    let _ = pool_builder().build_global();
}

/// Runs `f` on a thread pool of `workers` threads (default: one per core).
pub fn with_workers<T: Send>(
    workers: Option<usize>,
    f: impl FnOnce() -> T + Send,
) -> anyhow::Result<T> {
    let pool = pool_builder().num_threads(workers.unwrap_or(0)).build()?;
    Ok(pool.install(f))
}
