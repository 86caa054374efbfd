// The portal's YAML editor: CodeMirror 6 over a plain <textarea data-yaml-editor="SCHEMA_ID">, with
// YAML highlighting and completion of the fields the kind's CRD declares at the cursor (keys, enum
// values, booleans). The textarea stays the form field: every edit is copied back into it, so the
// form posts exactly as without JavaScript (where the textarea is simply shown).
import { EditorState } from "@codemirror/state";
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { syntaxHighlighting, defaultHighlightStyle, indentOnInput, bracketMatching } from "@codemirror/language";
import { autocompletion, completionKeymap } from "@codemirror/autocomplete";
import { yaml } from "@codemirror/lang-yaml";
import { parentPath, schemaAt, siblingKeys } from "./yaml_paths.js";

function describe(node) {
  const type = node["x-kubernetes-int-or-string"] ? "integer or string" : (node.type || "");
  return type + (node.enum ? ` (one of ${node.enum.join(", ")})` : "");
}

function keyOptions(node, taken) {
  return Object.entries(node.properties || {}).filter(([name]) => !taken.has(name)).map(([name, child]) => ({
    label: name,
    type: "property",
    detail: describe(child),
    info: child.description ? child.description.slice(0, 400) : undefined,
    apply: child.type === "object" || child.type === "array" ? `${name}:` : `${name}: `,
  }));
}

function valueOptions(node) {
  if (node.enum) return node.enum.map((value) => ({ label: String(value), type: "enum" }));
  if (node.type === "boolean") return ["true", "false"].map((label) => ({ label, type: "keyword" }));
  return [];
}

// Completion source: keys of the mapping at the cursor, or values of the key before it.
export function crdCompletions(schema) {
  return (context) => {
    const line = context.state.doc.lineAt(context.pos);
    const before = line.text.slice(0, context.pos - line.from);
    const lines = context.state.doc.toString().split("\n");
    const value = /^(\s*)(- )?([^\s:#][^:#]*?):\s+(\S*)$/.exec(before);
    const key = /^(\s*)(- )?([\w.\/-]*)$/.exec(before);
    if (value) {
      const indent = value[1].length + (value[2] ? 2 : 0);
      const path = parentPath(lines, line.number - 1, indent, value[2] ? value[1].length : -1);
      const node = path && schemaAt(schema, [...path, value[3].trim()]);
      const options = node ? valueOptions(node) : [];
      return options.length ? { from: context.pos - value[4].length, options } : null;
    }
    if (!key || (!context.explicit && key[3] === "" && !key[2])) return null;
    const indent = key[1].length + (key[2] ? 2 : 0);
    const path = parentPath(lines, line.number - 1, indent, key[2] ? key[1].length : -1);
    const node = path && schemaAt(schema, path);
    if (!node || !node.properties) return null;
    const taken = siblingKeys(lines, line.number - 1, indent);
    if (key[2]) taken.clear(); // a new list item: its mapping starts here
    return { from: context.pos - key[3].length, options: keyOptions(node, taken), validFor: /^[\w.\/-]*$/ };
  };
}

function upgrade(textarea) {
  const schemaElement = document.getElementById(textarea.dataset.yamlEditor);
  const schema = schemaElement ? JSON.parse(schemaElement.textContent) : {};
  const view = new EditorView({
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightActiveLine(), drawSelection(), history(),
        indentOnInput(), bracketMatching(), syntaxHighlighting(defaultHighlightStyle), yaml(),
        autocompletion({ override: [crdCompletions(schema)] }),
        keymap.of([...completionKeymap, ...defaultKeymap, ...historyKeymap, indentWithTab]),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) textarea.value = update.state.doc.toString();
        }),
        EditorView.theme({ "&": { border: "1px solid #e3e8ee", background: "#fff" }, ".cm-scroller": { minHeight: "24rem" } }),
      ],
    }),
  });
  textarea.style.display = "none";
  textarea.insertAdjacentElement("afterend", view.dom);
  textarea.yamlEditor = view;
  return view;
}

function start() {
  document.querySelectorAll("textarea[data-yaml-editor]").forEach(upgrade);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
