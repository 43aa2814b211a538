// src/webview/chat.js is the webview's own script (it runs in the page, not in the extension host); chat.ts
// imports it as text (esbuild: `with { type: "text" }`) and inlines it with the page's nonce.
declare const script: string;
export default script;
