//! coordination.k8s.io/v1: Leases.

use super::ResourceStrategy;
use crate::registry::PrinterColumn;

/// Leases: printed with their holder.
#[derive(Debug)]
pub struct Leases;

impl ResourceStrategy for Leases {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        // A Lease with no holder shows an empty cell, as kube-apiserver's printer leaves it.
        vec![PrinterColumn::cell(
            "Holder",
            "string",
            crate::table::doc("coordination.k8s.io/v1", "LeaseSpec", "holderIdentity"),
            |o, _| crate::table::workload::text(o.pointer("/spec/holderIdentity")),
        )]
    }
}
