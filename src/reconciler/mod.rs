//! The lifecycle reconciler (seed 004, DESIGN §4.6): what the hub side does next for a Spoke —
//! join, accept, addon enablement, syncing its ManagedCluster, and unjoining in finalizer order.
//!
//! [`lifecycle`] is the pure decision: from what is known about one Spoke ([`Facts`]) to the
//! next [`Action`]s and the phase to report. The loop around it gathers facts, carries out the
//! actions and comes back; it owns no policy of its own.

pub mod lifecycle;
