//! Lowering the CPU priority of the threads that do background work
//! (query indexers, SQL queries), so produce and fetch get the cores
//! first when they are contended.

/// Niceness background threads run at: the kernel gives a thread at nice
/// 10 about a tenth of the CPU share of one at 0 when both want a core.
pub const BACKGROUND_NICENESS: i32 = 10;

/// Lowers the calling thread's CPU priority to [`BACKGROUND_NICENESS`];
/// only that thread, since on Linux `setpriority` with a thread id
/// applies to that thread alone. Logs a warning if it cannot (the thread
/// then runs at normal priority); does nothing on other systems.
pub fn lower_current_thread(what: &str) {
    // Threads inherit their creator's niceness: the log's shared helper
    // (segment preallocation), started lazily by whoever appends first,
    // must not be started from here once this thread is lowered.
    herald_log::start_provisioner();
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions; setpriority only changes
        // the scheduling weight of this thread.
        let failed = unsafe {
            let tid = libc::gettid();
            libc::setpriority(
                libc::PRIO_PROCESS,
                tid as libc::id_t,
                BACKGROUND_NICENESS as libc::c_int,
            ) != 0
        };
        if failed {
            tracing::warn!(
                "the {what} thread runs at normal priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = what;
}

/// Puts the calling thread in the kernel's idle scheduling class
/// (`SCHED_IDLE`): it runs only when a core would otherwise be idle, so
/// under load it takes (almost) nothing from any other thread, nice 10
/// ones included, and it catches up when the load passes. For work that
/// must never slow producers and may lag (the history index). Logs a
/// warning if it cannot, and then lowers the thread as
/// [`lower_current_thread`] does; does nothing else on other systems.
pub fn idle_current_thread(what: &str) {
    herald_log::start_provisioner();
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; the call only changes its
        // scheduling class.
        let failed = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0;
        if failed {
            tracing::warn!(
                "the {what} thread cannot run in the idle class ({}); it runs at nice {BACKGROUND_NICENESS}",
                std::io::Error::last_os_error()
            );
            lower_current_thread(what);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = what;
}
