// ESLint for the extension (STYLE.md chores; `make lint`). The linters live in .ci/lint/node_modules
// (installed by .ci/lint/install.sh), so this config resolves its plugins from there.
import { createRequire } from "node:module";

const require = createRequire(new URL("../../.ci/lint/package.json", import.meta.url));
const js = require("@eslint/js");
const tseslint = require("typescript-eslint");
const globals = require("globals");

export default tseslint.config(
  { ignores: ["dist/**", "out/**", "node_modules/**", "e2e/**", "src/protocol.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["src/**/*.ts"],
    languageOptions: { globals: { ...globals.node } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      eqeqeq: ["error", "always", { null: "ignore" }],
      "no-console": "error",
    },
  },
  { files: ["eslint.config.mjs"], languageOptions: { globals: { ...globals.node } } },
  {
    files: ["src/webview/**/*.js"],
    languageOptions: { sourceType: "script", globals: { ...globals.browser, acquireVsCodeApi: "readonly" } },
    rules: { eqeqeq: ["error", "always", { null: "ignore" }] },
  },
);
