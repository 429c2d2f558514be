//! coordination.k8s.io/v1: Leases.

use crate::resource::ResourceStrategy;
use crate::table::PrinterColumn;
use crate::typed::{GoType, TypedField};

/// Leases: printed with their holder; a PUT must name the version it replaces (leader election
/// relies on it), and a PUT of a missing Lease creates it.
#[derive(Debug)]
pub struct Leases;

impl ResourceStrategy for Leases {
    fn typed_fields(&self) -> &'static [TypedField] {
        const FIELDS: &[TypedField] = &[
            TypedField::new("spec.acquireTime", "LeaseSpec", GoType::MicroTime),
            TypedField::new("spec.renewTime", "LeaseSpec", GoType::MicroTime),
        ];
        FIELDS
    }

    fn allows_unconditional_update(&self) -> bool {
        false
    }

    fn allows_create_on_update(&self) -> bool {
        true
    }

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
