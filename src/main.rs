/// mimalloc, not the C library's allocator: a hub serving thousands of spokes allocates and frees
/// small objects on every thread at once, and glibc's malloc spent nearly a third of the CPU
/// doing it (finding and consolidating free chunks) in the converge benchmark at 10,000 spokes.
/// The `system-allocator` feature keeps the C library's, which heap profilers (heaptrack) see.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    fleetform::cli::main()
}
