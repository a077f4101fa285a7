/** Stylesheets imported for their effect: Vite bundles them into the page's CSS file. */
declare module "*.css";
