//! Every task type linked into the binary, collected through `inventory`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::handler::RunFn;
use crate::task::Task;

/// One task type, as `#[derive(Task)]` registers it.
///
/// Registrations are made by the derive; read them through [`Registry`].
///
/// ```standalone_crate
/// # use pgq_core::{Registry, Task};
/// # #[derive(serde::Serialize, serde::Deserialize, Task)]
/// # #[task(queue = "email")] struct SendWelcome { user_id: i64 }
/// let registry = Registry::linked().unwrap();
/// for task in registry.tasks() {
///     println!("{} ({}) on queue {:?}", task.name(), task.type_name(), task.queue());
/// }
/// ```
pub struct TaskRegistration {
    name: &'static str,
    queue: &'static str,
    type_name: &'static str,
    lease: Option<Duration>,
    timeout: Option<Duration>,
    /// Whether its jobs carry a concurrency key (`#[task(concurrency_key)]`).
    keyed: bool,
    run_fn: fn() -> Option<RunFn>,
}

inventory::collect!(TaskRegistration);

impl TaskRegistration {
    #[doc(hidden)]
    pub const fn new<T: Task>(type_name: &'static str, run_fn: fn() -> Option<RunFn>) -> Self {
        Self {
            name: T::NAME,
            queue: T::QUEUE,
            type_name,
            lease: T::LEASE,
            timeout: T::TIMEOUT,
            keyed: T::CONCURRENCY.is_some(),
            run_fn,
        }
    }

    /// The task name stored in job rows: `#[task(name = ..)]`, or the type's name.
    ///
    /// ```standalone_crate
    /// # use pgq_core::{Registry, Task};
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(name = "billing.charge")]
    /// struct Charge { invoice_id: i64 }
    ///
    /// let registry = Registry::linked().unwrap();
    /// assert_eq!(registry.get("billing.charge").unwrap().name(), Charge::NAME);
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The queue the task's jobs go to unless an enqueue says otherwise.
    ///
    /// ```standalone_crate
    /// # use pgq_core::{Registry, Task};
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(queue = "reports")]
    /// struct BuildReport { month: u32 }
    ///
    /// let registry = Registry::linked().unwrap();
    /// assert_eq!(registry.get("BuildReport").unwrap().queue(), "reports");
    /// ```
    pub fn queue(&self) -> &'static str {
        self.queue
    }

    /// The Rust path of the type, for error messages.
    ///
    /// ```standalone_crate
    /// # use pgq_core::{Registry, Task};
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(name = "billing.charge")]
    /// struct Charge { invoice_id: i64 }
    ///
    /// let registry = Registry::linked().unwrap();
    /// assert!(registry.get("billing.charge").unwrap().type_name().ends_with("::Charge"));
    /// ```
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// Whether the type has a [`Handler`](crate::Handler), so that a worker can run it.
    ///
    /// ```standalone_crate
    /// # use pgq_core::{async_trait, Handler, JobContext, Registry, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Resize { image_id: i64 }
    /// # #[async_trait] impl Handler for Resize {
    /// #     async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> { Ok(()) }
    /// # }
    /// // Handled by another service: this binary only enqueues it.
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// struct Transcode { video_id: i64 }
    ///
    /// let registry = Registry::linked().unwrap();
    /// assert!(registry.get("Resize").unwrap().has_handler());
    /// assert!(!registry.get("Transcode").unwrap().has_handler());
    /// ```
    pub fn has_handler(&self) -> bool {
        (self.run_fn)().is_some()
    }

    pub(crate) fn lease(&self) -> Option<Duration> {
        self.lease
    }

    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    pub(crate) fn keyed(&self) -> bool {
        self.keyed
    }

    pub(crate) fn run_fn(&self) -> Option<RunFn> {
        (self.run_fn)()
    }
}

impl fmt::Debug for TaskRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskRegistration")
            .field("name", &self.name)
            .field("queue", &self.queue)
            .field("type_name", &self.type_name)
            .field("has_handler", &self.has_handler())
            .finish()
    }
}

/// The task types linked into this binary, by name.
///
/// ```standalone_crate
/// use pgq_core::{Registry, Task};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Task)]
/// #[task(queue = "reports")]
/// struct BuildReport { month: u32 }
///
/// let registry = Registry::linked().unwrap();
/// let task = registry.get("BuildReport").unwrap();
/// assert_eq!(task.queue(), "reports");
/// ```
#[derive(Debug, Clone)]
pub struct Registry {
    tasks: BTreeMap<&'static str, &'static TaskRegistration>,
}

impl Registry {
    /// Collects every task type linked into the binary.
    ///
    /// Fails with [`Error::DuplicateTaskName`] when two types register the same task name.
    ///
    /// ```standalone_crate
    /// # use pgq_core::{Registry, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct BuildReport { month: u32 }
    /// // At start-up: fail early, naming both types, if two tasks share a name.
    /// let registry = Registry::linked().expect("task names are unique");
    /// assert!(registry.get("SendWelcome").is_some());
    /// ```
    pub fn linked() -> Result<Self> {
        Self::from_registrations(inventory::iter::<TaskRegistration>)
    }

    pub(crate) fn from_registrations(
        registrations: impl IntoIterator<Item = &'static TaskRegistration>,
    ) -> Result<Self> {
        let mut tasks = BTreeMap::new();
        for registration in registrations {
            if let Some(first) = tasks.insert(registration.name, registration) {
                let (a, b) = sorted(first.type_name, registration.type_name);
                return Err(Error::DuplicateTaskName {
                    name: registration.name.to_owned(),
                    first_type: a.to_owned(),
                    second_type: b.to_owned(),
                });
            }
        }
        Ok(Self { tasks })
    }

    /// The registration of the task with this name, as stored in job rows.
    ///
    /// ```standalone_crate
    /// # use pgq_core::{Registry, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
    /// let registry = Registry::linked().unwrap();
    /// assert!(registry.get("SendWelcome").is_some());
    /// assert!(registry.get("NoSuchTask").is_none());
    /// ```
    pub fn get(&self, name: &str) -> Option<&'static TaskRegistration> {
        self.tasks.get(name).copied()
    }

    /// Every registered task, ordered by name.
    ///
    /// ```standalone_crate
    /// # use pgq_core::{Registry, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct BuildReport { month: u32 }
    /// let names: Vec<&str> = Registry::linked().unwrap().tasks().map(|task| task.name()).collect();
    /// assert_eq!(names, ["BuildReport", "SendWelcome"]);
    /// ```
    pub fn tasks(&self) -> impl Iterator<Item = &'static TaskRegistration> + '_ {
        self.tasks.values().copied()
    }
}

/// Link order is arbitrary; sorting keeps the error message stable.
fn sorted<'a>(a: &'a str, b: &'a str) -> (&'a str, &'a str) {
    if a <= b { (a, b) } else { (b, a) }
}

/// Registers a task type; emitted by `#[derive(Task)]`.
#[doc(hidden)]
#[macro_export]
macro_rules! __register_task {
    ($ty:ty) => {
        $crate::__private::inventory::submit! {
            $crate::__private::TaskRegistration::new::<$ty>(
                ::core::concat!(::core::module_path!(), "::", ::core::stringify!($ty)),
                {
                    fn run_fn() -> ::core::option::Option<$crate::__private::RunFn> {
                        #[allow(unused_imports)]
                        use $crate::__private::{ViaHandler as _, ViaNoHandler as _};
                        (&&$crate::__private::HandlerProbe::<$ty>::NEW).run_fn()
                    }
                    run_fn
                },
            )
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    static A: TaskRegistration = TaskRegistration {
        name: "same",
        queue: "default",
        type_name: "crate::A",
        lease: None,
        timeout: None,
        keyed: false,
        run_fn: || None,
    };
    static B: TaskRegistration = TaskRegistration {
        name: "same",
        queue: "default",
        type_name: "crate::B",
        lease: None,
        timeout: None,
        keyed: false,
        run_fn: || None,
    };

    #[test]
    fn two_types_with_one_name_are_an_error() {
        let err = Registry::from_registrations([&B, &A]).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"task name "same" is registered by two types: crate::A and crate::B"#
        );
    }

    #[test]
    fn lookup_by_name() {
        let registry = Registry::from_registrations([&A]).unwrap();
        assert_eq!(registry.get("same").unwrap().type_name(), "crate::A");
        assert!(registry.get("other").is_none());
    }
}
