fn main() -> std::process::ExitCode {
    fleetform::cli::main()
}
