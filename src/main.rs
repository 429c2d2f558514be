/// mimalloc, not the C library's allocator: a hub serving thousands of spokes allocates and frees
/// small objects on every thread at once, and glibc's malloc spent nearly a third of the CPU
/// doing it (finding and consolidating free chunks) in the converge benchmark at 10,000 spokes.
/// The `system-allocator` feature keeps the C library's, which heap profilers (heaptrack) see.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    without_transparent_huge_pages();
    fleetform::cli::main()
}

/// Keeps the kernel from backing this process's memory with transparent huge pages. mimalloc
/// asks for them on its arenas, and a 2 MiB page counts whole in the RSS however little of it
/// is in use: at 10,000 spokes the sync's high-water mark was 245 MiB with them and 216 without,
/// the hub's 462 and 440 MiB, at the same CPU (docs/sizing.md). The pods' memory limits are
/// sized on the RSS.
#[cfg(target_os = "linux")]
fn without_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes integers only and touches no memory of this process; a
    // kernel without it refuses (EINVAL), and the process runs as before.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

#[cfg(not(target_os = "linux"))]
fn without_transparent_huge_pages() {}
