// Prints the licence of every package bundled into static/editor (the lock file's non-dev
// packages), so the committed bundle carries its notices (run by `npm run build`).
import { readFileSync, readdirSync } from "node:fs";

const lock = JSON.parse(readFileSync("package-lock.json", "utf8"));
for (const [path, entry] of Object.entries(lock.packages)) {
  if (!path || entry.dev) continue;
  const name = path.replace(/^.*node_modules\//, "");
  const file = readdirSync(path).find((f) => /^licen[sc]e/i.test(f));
  process.stdout.write(`== ${name} ${entry.version} (${entry.license}) ==\n`);
  process.stdout.write(file ? readFileSync(`${path}/${file}`, "utf8") + "\n" : "(no licence file)\n");
}
