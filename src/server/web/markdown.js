// A small Markdown renderer for model output that builds DOM nodes and never parses HTML: every
// piece of text becomes a text node, so "<script>" or "<img onerror=...>" in a reply shows as
// those characters. Links are kept only for http(s) and mailto URLs.
//
// Blocks: fenced code (``` with an optional language), ATX headings, bullet and numbered lists,
// block quotes, horizontal rules, paragraphs. Inline: `code`, **bold**, *italic* / _italic_,
// [text](url), and bare line breaks inside a paragraph. An unterminated fence (a reply still
// streaming) renders as a code block up to the end.

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

function el(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

// Inline spans of one line of text, appended to `parent`.
export function renderInline(text, parent) {
  // Order matters: code first (its content is literal), then links, bold, italic.
  const pattern = /(`+)([\s\S]*?[^`])\1(?!`)|\[([^\]\n]+)\]\(([^)\s]+)\)|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\n]+)\*|\b_([^_\n]+)_\b/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) parent.append(document.createTextNode(text.slice(last, match.index)));
    last = match.index + match[0].length;
    if (match[1] !== undefined) {
      const code = el("code");
      code.textContent = match[2].trim() === "" ? match[2] : match[2].replace(/^ (.*) $/, "$1");
      parent.append(code);
    } else if (match[3] !== undefined) {
      const url = match[4];
      if (SAFE_URL.test(url)) {
        const link = el("a");
        link.href = url;
        link.rel = "noopener noreferrer nofollow";
        link.target = "_blank";
        renderInline(match[3], link);
        parent.append(link);
      } else {
        parent.append(document.createTextNode(match[0]));
      }
    } else if (match[5] !== undefined || match[6] !== undefined) {
      const strong = el("strong");
      renderInline(match[5] ?? match[6], strong);
      parent.append(strong);
    } else {
      const em = el("em");
      renderInline(match[7] ?? match[8], em);
      parent.append(em);
    }
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

// Lines joined by line breaks, each rendered inline.
function renderLines(lines, parent) {
  lines.forEach((line, i) => {
    if (i > 0) parent.append(el("br"));
    renderInline(line, parent);
  });
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || BULLET.test(line) || NUMBERED.test(line) ||
    QUOTE.test(line) || RULE.test(line);
}

// Renders `text` into a new <div class="markdown"> and returns it.
export function renderMarkdown(text) {
  const root = el("div", "markdown");
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (line.trim() === "") {
      i++;
    } else if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      i++;  // the closing fence (or past the end)
      const pre = el("pre");
      const code = el("code");
      if (m[2]) {
        code.dataset.language = m[2];
        const label = el("span", "code-language");
        label.textContent = m[2];
        pre.append(label);
      }
      code.textContent = body.join("\n");
      pre.append(code);
      root.append(pre);
    } else if ((m = HEADING.exec(line))) {
      const heading = el(`h${Math.min(m[1].length + 2, 6)}`);
      renderInline(m[2], heading);
      root.append(heading);
      i++;
    } else if (RULE.test(line)) {
      root.append(el("hr"));
      i++;
    } else if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        quoted.push(m[1]);
        i++;
      }
      const quote = el("blockquote");
      quote.append(...renderMarkdown(quoted.join("\n")).childNodes);
      root.append(quote);
    } else if (BULLET.test(line) || NUMBERED.test(line)) {
      const numbered = NUMBERED.test(line);
      const item = numbered ? NUMBERED : BULLET;
      const list = el(numbered ? "ol" : "ul");
      if (numbered) {
        const start = parseInt(NUMBERED.exec(line)[1], 10);
        if (start !== 1) list.start = start;
      }
      while (i < lines.length && (m = item.exec(lines[i]))) {
        const li = el("li");
        const itemLines = [numbered ? m[2] : m[1]];
        i++;
        // Indented continuation lines belong to the item.
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !item.test(lines[i]))
          itemLines.push(lines[i++].trim());
        renderLines(itemLines, li);
        list.append(li);
      }
      root.append(list);
    } else {
      const paragraph = [];
      while (i < lines.length && lines[i].trim() !== "" && (paragraph.length === 0 || !startsBlock(lines[i])))
        paragraph.push(lines[i++]);
      const p = el("p");
      renderLines(paragraph, p);
      root.append(p);
    }
  }
  return root;
}
