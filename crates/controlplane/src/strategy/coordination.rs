//! coordination.k8s.io/v1: Leases.

use super::ResourceStrategy;
use crate::registry::PrinterColumn;

/// Leases: printed with their holder.
#[derive(Debug)]
pub struct Leases;

impl ResourceStrategy for Leases {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![PrinterColumn::path(
            "Holder",
            "string",
            ".spec.holderIdentity",
        )]
    }
}
