//! A handle's kind is a closed enum (`HandleKind`): every kind the reader
//! accepts keeps its own name in a `HandleId`, never a fallback label.

use kvcr_audit::descriptor::{Handle, HandleId, HandleKind};

#[test]
fn every_handle_kind_keeps_its_name_through_its_id() {
    let cases = [
        (
            Handle::CudaIpc([7; 64]),
            HandleKind::CudaIpc,
            "cuda_ipc",
            None,
        ),
        (Handle::Fabric([7; 64]), HandleKind::Fabric, "fabric", None),
        (
            Handle::PosixFd(17),
            HandleKind::PosixFd,
            "posix_fd",
            Some(17),
        ),
    ];
    for (h, kind, name, fd) in cases {
        let id = HandleId::of(&h);
        assert_eq!(h.handle_kind(), kind);
        assert_eq!(h.kind(), name);
        assert_eq!(id.kind, kind);
        assert_eq!(id.kind_name(), name);
        assert_eq!(id.fd(), fd);
    }
}

#[test]
fn the_same_bytes_under_two_kinds_are_two_handles() {
    let ipc = HandleId::of(&Handle::CudaIpc([9; 64]));
    let fabric = HandleId::of(&Handle::Fabric([9; 64]));
    assert_ne!(ipc, fabric);
    assert_ne!(ipc.id, fabric.id);
    // The id bytes are unchanged by the enum: the kind still seeds the mix.
    assert_eq!(HandleId::of(&Handle::CudaIpc([9; 64])), ipc);
    // A negative fd keeps its bytes (and its kind).
    assert_eq!(HandleId::of(&Handle::PosixFd(-1)).fd(), Some(-1));
}
