//! The layer between fleetform's decisions and kube-rs that every component shares: what a
//! controller, loop or agent needs from the API machinery and is not itself a decision. Each
//! caller logs under its own target; nothing here logs.

pub mod crd;
