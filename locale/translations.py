"""The site's words in each language (issue 28), written into locale/<lang>/LC_MESSAGES/*.po by
`python locale/translations.py` (then `manage.py compilemessages`). Only the site's own words: never model text."""
from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

T = {
    "Language": {"fr": "Langue", "es": "Idioma", "zh_Hans": "语言"},
    "What a language model does between pressing Enter and the answer streaming in.": {
        "fr": "Ce que fait un modèle de langage entre le moment où vous appuyez sur Entrée et celui où la réponse s'affiche.",
        "es": "Lo que hace un modelo de lenguaje entre que pulsas Intro y que llega la respuesta.",
        "zh_Hans": "从你按下回车到答案逐字出现之间，语言模型都做了什么。"},
    "This page runs a real language model on this server and draws, step by step, what it computes between the moment you press Enter and the moment its answer streams in: every number below is measured on your run.": {
        "fr": "Cette page fait tourner un vrai modèle de langage sur ce serveur et dessine, étape par étape, ce qu'il calcule entre le moment où vous appuyez sur Entrée et celui où sa réponse s'affiche : chaque nombre ci-dessous est mesuré sur votre exécution.",
        "es": "Esta página ejecuta un modelo de lenguaje real en este servidor y dibuja, paso a paso, lo que calcula entre el momento en que pulsas Intro y el momento en que llega su respuesta: cada número de abajo se mide en tu ejecución.",
        "zh_Hans": "本页面在这台服务器上运行一个真实的语言模型，并一步一步画出它从你按下回车到答案逐字出现之间所计算的内容：下面的每个数字都是在你这次运行中测得的。"},
    "Run controls": {"fr": "Commandes de l'exécution", "es": "Controles de la ejecución", "zh_Hans": "运行控制"},
    "Play": {"fr": "Lancer", "es": "Ejecutar", "zh_Hans": "运行"},
    "Pause": {"fr": "Pause", "es": "Pausa", "zh_Hans": "暂停"},
    "Step": {"fr": "Un pas", "es": "Un paso", "zh_Hans": "单步"},
    "Resume": {"fr": "Reprendre", "es": "Reanudar", "zh_Hans": "继续"},
    "Stop": {"fr": "Arrêter", "es": "Detener", "zh_Hans": "停止"},
    "Restart": {"fr": "Recommencer", "es": "Reiniciar", "zh_Hans": "重新开始"},
    "Guess each token": {"fr": "Deviner chaque token", "es": "Adivinar cada token", "zh_Hans": "猜每个词元"},
    "Save run": {"fr": "Enregistrer", "es": "Guardar", "zh_Hans": "保存运行"},
    "Back to the original": {"fr": "Revenir à l'original", "es": "Volver al original", "zh_Hans": "回到原始运行"},
    "The reply": {"fr": "La réponse", "es": "La respuesta", "zh_Hans": "回复"},
    "What a language costs": {"fr": "Ce que coûte une langue", "es": "Lo que cuesta un idioma", "zh_Hans": "一种语言的代价"},
    "The vocabulary was learned from text that was mostly in some languages and little in others, so the same meaning costs different numbers of tokens depending on the language it is written in. Every token is one more position for the model to read, one more row of keys and values in the cache, and for a reply one more step. Below, one sentence in six languages is read by this server's own tokenizer: edit any line, or write your own, and count again. Where a character's bytes are split over several tokens (common for Chinese, Japanese and Arabic in a mostly English vocabulary), no token alone is that character.": {
        "fr": "Le vocabulaire a été appris sur des textes écrits surtout dans certaines langues et peu dans d'autres : le même sens coûte donc un nombre de tokens différent selon la langue. Chaque token est une position de plus à lire pour le modèle, une ligne de plus de clés et de valeurs dans le cache et, pour une réponse, une étape de plus. Ci-dessous, une même phrase en six langues est lue par le tokeniseur de ce serveur : modifiez une ligne, ou écrivez la vôtre, et recomptez. Quand les octets d'un caractère sont répartis sur plusieurs tokens (fréquent pour le chinois, le japonais et l'arabe avec un vocabulaire surtout anglais), aucun token seul n'est ce caractère.",
        "es": "El vocabulario se aprendió con textos escritos sobre todo en algunos idiomas y poco en otros, así que el mismo significado cuesta un número distinto de tokens según el idioma. Cada token es una posición más que el modelo debe leer, una fila más de claves y valores en la caché y, en una respuesta, un paso más. Abajo, una misma frase en seis idiomas la lee el tokenizador de este servidor: edita cualquier línea, o escribe la tuya, y vuelve a contar. Cuando los bytes de un carácter se reparten entre varios tokens (habitual en chino, japonés y árabe con un vocabulario sobre todo inglés), ningún token por sí solo es ese carácter.",
        "zh_Hans": "词表是从以某些语言为主、其他语言很少的文本中学到的，所以同一个意思用不同语言写出来，所需的词元数量不同。每多一个词元，模型就要多读一个位置，缓存里就多一行键和值，生成回复时就多一步。下面，同一句话的六种语言版本由这台服务器自己的分词器读取：你可以修改任意一行，或写下你自己的句子，然后重新计数。当一个字符的字节被拆分到多个词元中时（在以英语为主的词表里，中文、日文和阿拉伯文常常如此），没有哪一个词元单独就是这个字符。"},
    "Connecting to the server…": {"fr": "Connexion au serveur…", "es": "Conectando con el servidor…", "zh_Hans": "正在连接服务器…"},
    "Not connected to the server; reconnecting in %(seconds)s s.": {
        "fr": "Pas de connexion au serveur ; nouvelle tentative dans %(seconds)s s.",
        "es": "Sin conexión con el servidor; reconectando en %(seconds)s s.",
        "zh_Hans": "未连接到服务器；%(seconds)s 秒后重新连接。"},
    "Not connected to the server.": {"fr": "Pas de connexion au serveur.", "es": "Sin conexión con el servidor.", "zh_Hans": "未连接到服务器。"},
    "Showing a recorded example. Press play to run the model on your prompt.": {
        "fr": "Un exemple enregistré est affiché. Appuyez sur Lancer pour faire tourner le modèle sur votre prompt.",
        "es": "Se muestra un ejemplo grabado. Pulsa Ejecutar para hacer funcionar el modelo con tu prompt.",
        "zh_Hans": "正在显示一个录制的示例。按“运行”，让模型处理你的提示词。"},
    "Paused after step %(step)s.": {"fr": "En pause après l'étape %(step)s.", "es": "En pausa tras el paso %(step)s.", "zh_Hans": "已在第 %(step)s 步后暂停。"},
    "Paused after the prefill. Press step.": {
        "fr": "En pause après le préremplissage. Appuyez sur Un pas.",
        "es": "En pausa tras el prellenado. Pulsa Un paso.",
        "zh_Hans": "已在预填充后暂停。请按“单步”。"},
    "Ready. Press play to run the model on your prompt.": {
        "fr": "Prêt. Appuyez sur Lancer pour faire tourner le modèle sur votre prompt.",
        "es": "Listo. Pulsa Ejecutar para hacer funcionar el modelo con tu prompt.",
        "zh_Hans": "准备就绪。按“运行”，让模型处理你的提示词。"},
}
LANGS = ("fr", "es", "zh_Hans")
PLURAL = {"fr": "nplurals=2; plural=(n > 1);", "es": "nplurals=2; plural=(n != 1);", "zh_Hans": "nplurals=1; plural=0;"}


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def msgids(po: Path) -> list[str]:
    """The msgids makemessages wrote (the marked strings of the source), in its order."""
    out, current, reading = [], [], False
    for line in po.read_text(encoding="utf-8").splitlines() + [""]:
        if line.startswith("msgid "):
            current, reading = [line[6:]], True
        elif reading and line.startswith('"'):
            current.append(line)
        elif reading:
            reading = False
            text = "".join(re.findall(r'^"(.*)"$', part)[0] for part in current)
            text = re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), text)
            if text:
                out.append(text)
    return out


def write(lang: str, domain: str) -> list[str]:
    """Rewrite one .po with every marked string translated; returns those still without a translation."""
    po = HERE / lang / "LC_MESSAGES" / f"{domain}.po"
    ids = msgids(po)
    missing = [m for m in ids if lang not in T.get(m, {})]
    head = ['msgid ""', 'msgstr ""', '"Content-Type: text/plain; charset=UTF-8\\n"', f'"Language: {lang}\\n"',
            f'"Plural-Forms: {PLURAL[lang]}\\n"', ""]
    body = []
    for m in ids:
        body += [f"msgid {quote(m)}", f"msgstr {quote(T.get(m, {}).get(lang, ''))}", ""]
    po.write_text("\n".join(head + body), encoding="utf-8")
    return missing


if __name__ == "__main__":
    left = {f"{lang}/{domain}": write(lang, domain) for lang in LANGS for domain in ("django", "djangojs")}
    left = {k: v for k, v in left.items() if v}
    if left:
        print("untranslated:", left, file=sys.stderr)
        sys.exit(1)
