"""The class quiz's recap for the host (issue 26): CSV, JSON and a printable page of every question since Reset."""
import csv
import io

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import formats
from django.utils.translation import gettext

from explainer.host import host_only
from explainer.services.workshop import quiz


def _formula_safe(value):
    """A spreadsheet reads a cell starting with = + - @ as a formula: the class's typed text stays text."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


@host_only
def recap_csv(request):
    """One row per question and token: the model's odds beside the class's counts."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=quiz.CSV_FIELDS)
    writer.writeheader()
    for row in quiz.recap_rows(quiz.recap()):
        writer.writerow({k: _formula_safe(v) for k, v in row.items()})
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="hit-enter-quiz.csv"'
    return response


@host_only
def recap_json(request):
    response = JsonResponse({"questions": quiz.recap()}, json_dumps_params={"ensure_ascii": False, "indent": 1})
    response["Content-Disposition"] = 'attachment; filename="hit-enter-quiz.json"'
    return response


@host_only
def recap_page(request):
    """The printable page: each question, its text so far, and the class's answers beside the model's odds."""
    return render(request, "quiz_recap.html", {"questions": [_printable(q) for q in quiz.recap()]})


def _printable(question: dict) -> dict:
    """The page's rows: by the model's rank, each token's piece with its spaces shown, probabilities in percent (in the
    page's language, as its numbers)."""
    end_of_reply = gettext("⟨end of reply⟩")
    rows = sorted(question["candidates"], key=lambda c: c["rank"] if c["rank"] is not None else 99)
    shown = lambda text: text.replace(" ", "\u2423").replace("\n", "\u21b5") or "\u2205"  # noqa: E731 (as the article)
    for row in rows:
        row["label"] = end_of_reply if row["special"] else shown(row["text"])
        row["percent"] = "–" if row["model_prob"] is None else gettext("%(percent)s%%") % {
            "percent": formats.number_format(row["model_prob"] * 100, 1, use_l10n=True)}
    drawn = question["drawn"]
    return {**question, "candidates": rows, "drawn_label": shown(drawn["text"]) if drawn else None,
            "others": [{**o, "label": shown(o["text"])} for o in question["others"]]}
