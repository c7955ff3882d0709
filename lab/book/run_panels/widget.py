"""The live face of a run panel: its controls, the plan in words, Run and Stop, a status line, a log, results."""

from __future__ import annotations

import html

from lab import LabError

#: Progress lines kept on screen (the whole log stays in ``panel.progress.lines``).
LOG_LINES = 14


def values_of(controls: dict) -> dict:
    """Widget values as a run takes them (a multiple selection becomes a list)."""
    return {name: list(w.value) if isinstance(w.value, tuple) else w.value for name, w in controls.items()}


def build_widget(panel):
    import ipywidgets as w

    controls = panel.controls()
    run = w.Button(description="Run", button_style="primary", icon="play")
    stop = w.Button(description="Stop", button_style="warning", icon="stop", disabled=True)
    plan_html, status, log = w.HTML(), w.HTML(), w.HTML()
    results = w.VBox()
    panel.result_box = results

    def show_plan(_change=None):
        try:
            plan = panel.plan(values_of(controls))
        except LabError as exc:
            plan_html.value = f"<i>{html.escape(str(exc))}</i>"
            run.disabled = True
            return
        run.disabled = panel.running
        items = "".join(f"<li>{html.escape(line)}</li>" for line in plan.lines)
        plan_html.value = f"<b>{html.escape(plan.title)}</b><ul>{items}</ul>"

    def on_line(_line):
        status.value = f"<b>{html.escape(panel.progress.status)}</b>"
        shown = panel.progress.lines[-LOG_LINES:]
        log.value = "<pre style='font-size:85%;margin:0'>" + html.escape("\n".join(shown)) + "</pre>"
        finished = panel.job is not None and panel.job.done.is_set()
        busy = panel.running and not finished and not panel.progress.status.startswith(("done", "stopped", "error"))
        run.disabled, stop.disabled = busy, not busy

    def on_run(_button):
        try:
            panel.start(values_of(controls))
        except LabError as exc:
            status.value = f"<b>{html.escape(str(exc))}</b>"
            return
        run.disabled, stop.disabled = True, False

    def on_stop(_button):
        stop.disabled = True
        panel.stop()

    for control in controls.values():
        control.observe(show_plan, names="value")
    panel.progress.listeners.append(on_line)
    run.on_click(on_run)
    stop.on_click(on_stop)
    show_plan()
    box = w.VBox([w.HTML(f"<b>{html.escape(panel.title)}</b>"),
                  w.HBox(list(controls.values()), layout=w.Layout(flex_flow="row wrap")),
                  plan_html, w.HBox([run, stop]), status, log, results])
    box.panel_parts = {"controls": controls, "run": run, "stop": stop, "status": status, "log": log,
                       "plan": plan_html, "results": results}
    return box
