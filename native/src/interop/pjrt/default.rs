//! The process-wide default registry's side of PJRT ([`crate::install_or_default`]): a client
//! registered in it ([`register_default`], through its [`PjrtHost`](super::PjrtHost)), and the
//! import and export that follow its rules without naming a registry
//! ([`PjrtClient::import`], [`PjrtBuffer::to_dlpack`]).

use std::sync::Arc;

use dlport_core::abi::DLPackVersion;
use dlport_core::backend::Backend;
use dlport_core::error::BackendError;
use dlport_core::{CopyPolicy, Error, ExportOptions, ImportOptions, ManagedTensor};

use super::backend::PjrtBackend;
use super::host::{PJRT_HOST_NAME, add};
use crate::pjrt::{PjrtBuffer, PjrtClient};

/// Registers `client` as a backend of the process-wide default registry (installed first if
/// none is in force), through its [`PjrtHost`](super::PjrtHost): from then on its device type
/// resolves there, and the bindings' imports and exports of its buffers follow that registry.
/// A client of a platform already registered takes the earlier one's place (its tensors stay
/// valid). Returns the backend.
pub fn register_default(client: &PjrtClient) -> Result<Arc<PjrtBackend>, Error> {
    let backend = PjrtBackend::new(client.clone());
    let r = crate::install_or_default();
    if r.get(PJRT_HOST_NAME).is_none() {
        return Err(Error::Backend(BackendError::unsupported(
            backend.name(),
            "registration in the process-wide registry: it was installed by other code without \
             dlport-native's `pjrt` backend (register a PjrtBackend in that registry instead)",
        )));
    }
    add(backend.clone());
    Ok(backend)
}

impl PjrtClient {
    /// Imports a DLPack tensor as a PJRT buffer under the process-wide default registry's
    /// rules ([`import_with`](Self::import_with) with `crate::install_or_default()` and the
    /// copy policy `copy`).
    pub fn import(
        &self,
        tensor: ManagedTensor,
        copy: CopyPolicy,
        device: Option<i32>,
    ) -> Result<PjrtBuffer, Error> {
        let options = ImportOptions {
            copy,
            ..ImportOptions::default()
        };
        self.import_with(crate::install_or_default(), tensor, &options, device)
    }
}

impl PjrtBuffer {
    /// Exports the buffer without a copy by the process-wide default registry's export
    /// ([`to_dlpack_with`](Self::to_dlpack_with)); `versioned` picks the DLPack 1.x form,
    /// else the legacy one.
    pub fn to_dlpack(&self, versioned: bool) -> Result<ManagedTensor, Error> {
        let options = ExportOptions {
            max_version: versioned.then_some(DLPackVersion::CURRENT),
            ..ExportOptions::default()
        };
        self.to_dlpack_with(crate::install_or_default(), &options)
    }
}
