"""The HTML shells of the console's pages. Dynamic values are escaped here; table data never
appears in HTML at all: the page's script fetches it as JSON and renders it as text."""

from __future__ import annotations

import html
import json

_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="{csrf}">
<title>{title}</title>
<link rel="stylesheet" href="/static/console.css">
</head>"""


def _head(title: str, csrf: str) -> str:
    return _HEAD.format(title=html.escape(title), csrf=html.escape(csrf, quote=True))


def login_page(login_token: str, message: str = "") -> str:
    """The log-in form (its CSRF token is double-submitted: a cookie and this field)."""
    note = f'<p class="error" id="login-error">{html.escape(message)}</p>' if message else ""
    return (
        _head("Pit console: log in", "")
        + '<body class="login"><main><h1>Pit console</h1>'
        + note
        + '<form method="post" action="/login" id="login-form">'
        + f'<input type="hidden" name="csrf" value="{html.escape(login_token, quote=True)}">'
        + '<label>Name <input name="name" id="name" autocomplete="username" required></label>'
        + '<label>Password <input name="password" id="password" type="password" '
        + 'autocomplete="current-password" required></label>'
        + '<button type="submit" id="login">Log in</button></form></main></body></html>'
    )


def app_page(view: str, csrf: str, user: str, role: str, actions: list[str], table_id: str = "") -> str:
    """A floor, table or dealer page: a shell the script fills from the server's stream."""
    title = {
        "floor": "Pit floor",
        "table": f"Table {table_id}",
        "dealer": f"Dealer {table_id}",
        "tables": f"Tables {table_id}",
    }[view]
    attrs = {
        "data-view": view,
        "data-table": table_id,
        "data-user": user,
        "data-role": role,
        "data-actions": json.dumps(sorted(actions)),
    }
    body_attrs = " ".join(f'{k}="{html.escape(v, quote=True)}"' for k, v in attrs.items())
    header = ""
    if view != "dealer":
        header = (
            '<header><a href="#app" class="skip">Skip to content</a>'
            '<a href="/" id="home">Floor</a> <span id="who"></span>'
            '<button type="button" id="sound" aria-pressed="false">Sound off</button>'
            '<form method="post" action="/logout" class="logout">'
            f'<input type="hidden" name="csrf" value="{html.escape(csrf, quote=True)}">'
            '<button type="submit" id="logout">Log out</button></form></header>'
        )
    dialog = (
        '<dialog id="confirm"><form method="dialog"><h2 id="confirm-title"></h2>'
        '<div id="confirm-fields"></div><pre id="confirm-text"></pre>'
        '<button value="cancel" id="confirm-cancel">Cancel</button> '
        '<button value="send" id="confirm-send">Send</button></form></dialog>'
    )
    return (
        _head(title, csrf)
        + f'<body class="view-{view}" {body_attrs}>'
        + header
        + f'<main id="app" tabindex="-1"><p id="connection">Connecting…</p></main>{dialog}'
        + '<script src="/static/reveal-check.js"></script>'
        + '<script src="/static/console.js"></script></body></html>'
    )
