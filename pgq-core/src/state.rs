//! Application state handed to handlers: values by type, set on the worker builder.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

/// Values of distinct types, shared by every job of a worker.
#[derive(Debug, Clone, Default)]
pub(crate) struct StateMap {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl StateMap {
    pub(crate) fn insert<S: Send + Sync + 'static>(&mut self, value: S) {
        self.values.insert(TypeId::of::<S>(), Arc::new(value));
    }

    pub(crate) fn get<S: Send + Sync + 'static>(&self) -> Option<&S> {
        self.values.get(&TypeId::of::<S>())?.downcast_ref()
    }
}
