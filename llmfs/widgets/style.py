"""The one stylesheet of llmfs's widgets and HTML renderers.

Every HTML fragment and every widget wraps its markup in an element of class ``llmfs`` and
carries this stylesheet, so a table looks the same as a widget and as plain HTML. Rules:

* normal line height (ipywidgets sets 28 px on widget text), short lists kept on one line
  (``white-space: nowrap`` on code and number cells); what can grow wide fits its output
  instead of hiding behind a scroll bar: a trace table wraps its step labels, headers, offsets
  and values, and a storage diagram scales down to the output's width (a 900 px window shows
  all of both); only a table too wide even so scrolls sideways;
* colours are theme variables: JupyterLab's ``--jp-*`` variables with light fallbacks, and dark
  values under JupyterLab's dark theme (``data-jp-theme-light="false"``), VS Code's dark theme
  and ``prefers-color-scheme: dark`` outside both;
* every text colour has a contrast of at least 4.5:1 against its background in both themes, the
  selection is a thick outline plus bold text and a glyph, never a colour alone, and focused
  controls get a visible focus ring.
"""

from __future__ import annotations

#: Light values (also the fallbacks when no theme variable is defined).
LIGHT = {
    "--llmfs-fg": "var(--jp-ui-font-color0, #1a1a1a)",
    "--llmfs-muted": "var(--jp-ui-font-color1, #3d3d3d)",
    "--llmfs-bg": "var(--jp-layout-color0, #ffffff)",
    "--llmfs-head": "var(--jp-layout-color2, #eeeeee)",
    "--llmfs-border": "#767676",
    "--llmfs-cell": "#ffffff",
    "--llmfs-shared": "#e3eefa",
    "--llmfs-copy": "#fde6cc",
    "--llmfs-line": "#2f4b7c",
    "--llmfs-accent": "#a4161a",
    "--llmfs-accent-bg": "#fff0c2",
    "--llmfs-hatch": "#5c5c5c",
    "--llmfs-right": "#e3f4e3",
    "--llmfs-wrong": "#fbe3e3",
    "--llmfs-focus": "#1a5fb4",
    "--llmfs-grad": "#ffd8a8",
}
#: Dark values: light text on dark fills, same meanings.
DARK = {
    "--llmfs-fg": "var(--jp-ui-font-color0, #f0f0f0)",
    "--llmfs-muted": "var(--jp-ui-font-color1, #d0d0d0)",
    "--llmfs-bg": "var(--jp-layout-color0, #111111)",
    "--llmfs-head": "var(--jp-layout-color2, #2b2b2b)",
    "--llmfs-border": "#9a9a9a",
    "--llmfs-cell": "#1b1b1b",
    "--llmfs-shared": "#1d3650",
    "--llmfs-copy": "#4a2f12",
    "--llmfs-line": "#9cc3ff",
    "--llmfs-accent": "#ff8a80",
    "--llmfs-accent-bg": "#4d3b00",
    "--llmfs-hatch": "#b0b0b0",
    "--llmfs-right": "#1f3d1f",
    "--llmfs-wrong": "#4a1f1f",
    "--llmfs-focus": "#8ab4f8",
    "--llmfs-grad": "#6b3d00",
}


def _block(selector: str, values: dict[str, str]) -> str:
    body = "".join(f"{name}:{value};" for name, value in values.items())
    return f"{selector}{{{body}}}"


RULES = """
.llmfs{color:var(--llmfs-fg);line-height:1.4;font-size:13px;max-width:100%;overflow-x:auto}
.llmfs *{line-height:1.4}
.llmfs table{border-collapse:collapse;font-family:var(--jp-code-font-family,monospace);
font-size:13px;margin:4px 0;color:var(--llmfs-fg)}
.llmfs caption{text-align:left;padding:2px 0;caption-side:top}
.llmfs th,.llmfs td{border:1px solid var(--llmfs-border);padding:2px 8px;text-align:left;
vertical-align:top;white-space:nowrap}
.llmfs thead th,.llmfs th[scope=row]{background:var(--llmfs-head)}
.llmfs td.llmfs-wrap{white-space:normal;min-width:24em}
.llmfs code{white-space:nowrap;font-family:var(--jp-code-font-family,monospace)}
.llmfs td.llmfs-on,.llmfs th.llmfs-on,.llmfs tr.llmfs-on>*{font-weight:bold;
background:var(--llmfs-accent-bg);
outline:2px solid var(--llmfs-accent);outline-offset:-2px}
.llmfs tr[data-row]{cursor:pointer}
.llmfs tr[data-row]:focus-visible,.llmfs button:focus-visible,.llmfs [tabindex]:focus-visible,
.llmfs summary:focus-visible{outline:3px solid var(--llmfs-focus);outline-offset:1px}
.llmfs details>summary{cursor:pointer}
.llmfs .llmfs-status{min-height:1.4em;font-size:13px;margin:4px 0;white-space:normal}
.llmfs .llmfs-legend{font-size:12px;margin:2px 0}
.llmfs .llmfs-verdict[data-status=right],.llmfs tr[data-status=right]>td:last-child{
background:var(--llmfs-right)}
.llmfs .llmfs-verdict[data-status=wrong],.llmfs tr[data-status=wrong]>td:last-child{
background:var(--llmfs-wrong)}
.llmfs .llmfs-controls{display:flex;flex-direction:column;gap:4px;margin:4px 0}
.llmfs .llmfs-step-group{display:flex;gap:6px;align-items:center;flex-wrap:nowrap}
.llmfs .llmfs-step-group>button{flex:none;white-space:nowrap}
.llmfs .llmfs-nowrap{white-space:nowrap}
.llmfs button{font:inherit;color:var(--llmfs-fg);background:var(--llmfs-head);
border:1px solid var(--llmfs-border);border-radius:3px;padding:2px 10px;cursor:pointer}
.llmfs button[aria-pressed=true]{font-weight:bold;outline:2px solid var(--llmfs-accent)}
.llmfs-diagram-scroll{overflow-x:auto;max-width:100%}
.llmfs-diagram-scroll img.llmfs-diagram-image,.llmfs-diagram-scroll svg.llmfs-diagram{
max-width:100%;height:auto;display:block}
.llmfs table.llmfs-trace{max-width:100%}
.llmfs table.llmfs-trace thead th{white-space:normal}
.llmfs table.llmfs-trace th,.llmfs table.llmfs-trace td{padding:2px 5px}
.llmfs table.llmfs-trace th[scope=row]{text-align:left}
.llmfs table.llmfs-trace th[scope=row] code{white-space:normal;overflow-wrap:break-word}
.llmfs table.llmfs-trace td[data-field=offsets],.llmfs table.llmfs-trace td[data-field=values]{
white-space:normal;overflow-wrap:break-word;min-width:4em}
.llmfs table.llmfs-trace td.llmfs-wrap{min-width:10em}
svg.llmfs-diagram{display:block;font-family:var(--jp-code-font-family,monospace)}
svg.llmfs-diagram .llmfs-bg{fill:var(--llmfs-bg)}
svg.llmfs-diagram text{fill:var(--llmfs-fg)}
svg.llmfs-diagram text.llmfs-small{fill:var(--llmfs-muted)}
svg.llmfs-diagram .llmfs-cell rect{fill:var(--llmfs-cell);stroke:var(--llmfs-border)}
svg.llmfs-diagram .llmfs-slot rect{fill:var(--llmfs-shared);stroke:var(--llmfs-border)}
svg.llmfs-diagram .llmfs-strip-copy .llmfs-slot rect{fill:var(--llmfs-copy)}
svg.llmfs-diagram .llmfs-hatch{stroke:var(--llmfs-hatch)}
svg.llmfs-diagram .llmfs-lines,svg.llmfs-diagram .llmfs-line{pointer-events:none}
svg.llmfs-diagram .llmfs-line{stroke:var(--llmfs-line);opacity:.75}
svg.llmfs-diagram .llmfs-gap{stroke:var(--llmfs-accent)}
svg.llmfs-diagram .llmfs-slot.llmfs-grad-on rect{fill:var(--llmfs-grad)}
svg.llmfs-diagram .llmfs-grad-arrow{fill:var(--llmfs-line)}
svg.llmfs-diagram text.llmfs-gap-text{fill:var(--llmfs-accent)}
svg.llmfs-diagram .llmfs-cell{cursor:pointer}
svg.llmfs-diagram .llmfs-cell:focus{outline:none}
svg.llmfs-diagram .llmfs-cell:focus-visible rect{stroke:var(--llmfs-focus);stroke-width:3}
svg.llmfs-diagram .llmfs-on rect{stroke:var(--llmfs-accent);stroke-width:3;
fill:var(--llmfs-accent-bg)}
svg.llmfs-diagram .llmfs-on text{font-weight:bold}
svg.llmfs-diagram .llmfs-line.llmfs-on{stroke:var(--llmfs-accent);stroke-width:3;opacity:1}
svg.llmfs-diagram .llmfs-mark{visibility:hidden}
svg.llmfs-diagram .llmfs-on .llmfs-mark{visibility:visible}
.llmfs-comparison p,.llmfs-comparison li{white-space:normal;overflow-wrap:anywhere;
max-width:60em;margin:2px 0}
.llmfs-comparison .llmfs-headline{padding:2px 6px}
.llmfs-comparison ul{margin:2px 0;padding-left:1.4em}
.llmfs-comparison li>ul{list-style:disc}
.llmfs-comparison li[data-status=wrong]{list-style:none}
.llmfs-comparison .llmfs-fields>li{list-style:none;margin-left:-1.2em}
.llmfs-comparison code{white-space:normal;overflow-wrap:anywhere}
.llmfs-comparison .llmfs-explanation{border-left:3px solid var(--llmfs-line);
padding:0 8px;margin:6px 0;max-width:60em}
.llmfs-comparison .llmfs-explanation pre{white-space:pre-wrap;overflow-wrap:anywhere}
.jp-OutputArea-output .llmfs,.widget-html-content .llmfs{line-height:1.4}
""".replace("\n", "")

STYLESHEET = (
    _block(".llmfs", LIGHT)
    + _block('body[data-jp-theme-light="false"] .llmfs', DARK)
    + _block("body.vscode-dark .llmfs", DARK)
    + "@media (prefers-color-scheme: dark){"
    + _block("body:not([data-jp-theme-light]):not(.vscode-light) .llmfs", DARK)
    + "}"
    + RULES
)


def style_tag() -> str:
    """The stylesheet as a ``<style>`` element, included once per rendered fragment."""
    return f"<style>{STYLESHEET}</style>"


def contrast(foreground: str, background: str) -> float:
    """WCAG contrast ratio of two ``#rrggbb`` colours (1 to 21)."""

    def luminance(colour: str) -> float:
        channels = [int(colour[k : k + 2], 16) / 255 for k in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def fallback(value: str) -> str:
    """The colour a theme value falls back to: ``var(--jp-x, #123456)`` -> ``#123456``."""
    return value.rsplit(",", 1)[-1].strip(" )") if value.startswith("var(") else value


__all__ = ["DARK", "LIGHT", "STYLESHEET", "contrast", "fallback", "style_tag"]
