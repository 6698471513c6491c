// pgq dashboard: live updates of a job page (server-sent events) and bulk selection on the job
// list. Everything it writes goes through textContent or attributes: values are never parsed as
// HTML. The pages work without it.
(function () {
  "use strict";

  function text(id, value) {
    var el = document.getElementById(id);
    if (el) { el.textContent = value; }
  }

  function followJob() {
    var job = document.getElementById("job");
    if (!job || !job.dataset.live || !window.EventSource) { return; }
    var initial = job.dataset.status;
    var source = new EventSource(job.dataset.live);
    source.addEventListener("job", function (event) {
      var change = JSON.parse(event.data);
      var status = document.getElementById("job-status");
      if (status) {
        status.textContent = change.status;
        status.className = "status big " + change.status;
      }
      job.dataset.status = change.status;
      var progress = document.getElementById("job-progress");
      if (progress) { progress.value = change.progress; }
      text("job-progress-text", change.progress + "%");
      text("job-stage", change.stage || "");
      text("job-attempts", change.attempts + " of " + change.max_attempts);
      var finished = ["completed", "failed", "cancelled"].indexOf(change.status) >= 0;
      if (finished) {
        source.close();
        // The finished page shows the timing, errors and actions a finished job has.
        if (finished && change.status !== initial) { window.location.reload(); }
      }
    });
    source.addEventListener("gone", function () { source.close(); });
  }

  function bulkSelection() {
    var form = document.getElementById("bulk");
    if (!form) { return; }
    var all = document.getElementById("select-all");
    var picks = Array.prototype.slice.call(form.querySelectorAll("input.pick"));
    var buttons = Array.prototype.slice.call(form.querySelectorAll(".bulk-bar button"));
    var count = document.getElementById("selected-count");
    function refresh() {
      var n = picks.filter(function (p) { return p.checked; }).length;
      buttons.forEach(function (b) { b.disabled = n === 0; });
      if (count) { count.textContent = n === 0 ? "Tick jobs to act on them:" : n + " selected:"; }
      if (all) {
        all.checked = n > 0 && n === picks.length;
        all.indeterminate = n > 0 && n < picks.length;
      }
    }
    if (all) {
      all.addEventListener("change", function () {
        picks.forEach(function (p) { p.checked = all.checked; });
        refresh();
      });
    }
    picks.forEach(function (p) { p.addEventListener("change", refresh); });
    refresh();
  }

  document.addEventListener("DOMContentLoaded", function () {
    followJob();
    bulkSelection();
  });
})();
